"""bench/soak.py still runs end to end, and a broken bound makes it fail.

The soak is a benchmark (its release run takes 30 minutes, docs/operations.md); here it runs
for a few seconds with tiny settings, enough for every loop of it to go round: both servers,
bursts, the continuous searcher, the ingest loop with `--prune`, the reembed, SIGTERM, the
integrity check and the summary. One bound is set so that it cannot hold (a server's private
memory may not grow by -1 MiB), so the run must also report that bound broken and exit 1, and
only that one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests import processes

REPO_ROOT = Path(__file__).resolve().parent.parent
SOAK = REPO_ROOT / "bench" / "soak.py"


def test_soak_runs_and_fails_on_a_broken_bound(tmp_path: Path) -> None:
    done = processes.run(
        [
            sys.executable,
            str(SOAK),
            "--minutes",
            "0.06",
            "--notes",
            "20",
            "--burst",
            "2",
            "--gap-seconds",
            "1",
            "--searchers",
            "1",
            "--ingest-seconds",
            "1",
            "--sample-seconds",
            "2",
            "--warm-up-seconds",
            "2",
            "--rss-growth-mib",
            "-1",
            "--keep",
            str(tmp_path / "soak"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    summary = {
        line.split(" | ")[0].strip("| "): line.split(" | ", 1)[1].rstrip(" |")
        for line in out.splitlines()
        if line.startswith("| ") and " | " in line
    }
    assert summary["errors"] == "0", out + done.stderr
    assert summary["integrity_check"] == "ok"
    assert summary["reembed"].startswith("re-embedded "), summary["reembed"]
    assert int(summary["ingest runs (edits, additions, deletions)"]) >= 1
    assert "left behind: nothing" in summary["SIGTERM"]
    assert "http (continuous)" in summary["requests"] and "stdio" in summary["requests"]
    broken = [line for line in out.splitlines() if line.startswith("BOUND BROKEN: ")]
    assert len(broken) == 2, out  # both servers' memory, nothing else
    assert all(" private memory grew " in line for line in broken), broken
