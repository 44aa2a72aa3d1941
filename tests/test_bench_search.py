"""bench/search.py still builds its corpus on the current schema and searches it exactly.

The latency tables of docs/search.md and docs/scale-out.md come from this script; its builders
write the store's rows themselves (for speed), so a migration that adds a column (as migration 11
gave `document_tag` its store) breaks them silently until the next long run. Here the script
runs end to end on a corpus of 200 chunks (2,000 words), on an SQLite file and on PostgreSQL
(its bulk builder), with every scope kind, and each cell must report exact recall against the
brute force.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store_backends import is_postgres

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH = REPO_ROOT / "bench" / "search.py"
SMALL_RUN = ["--chunks", "200", "--vocabulary", "2000", "--queries", "2", "--warmup", "1",
             "--modes", "hybrid", "--filters", "tag,meta,path"]  # fmt: skip
# A result row: mode, scope label ("unscoped", "tag 0.1%", ...), k, p50, p95, recall@k.
ROW = re.compile(
    r"^hybrid\s+(unscoped|(?:tag|meta|path) [\d.]+%)\s+10\s+[\d.]+\s+[\d.]+\s+([\d.]+)"
)


def run_bench(*args: str, small_run: list[str] = SMALL_RUN) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *small_run, *args],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def cells(done: subprocess.CompletedProcess[str]) -> list[tuple[str, float]]:
    assert done.returncode == 0, done.stderr[-3000:]
    return [(m[1], float(m[2])) for m in map(ROW.match, done.stdout.splitlines()) if m]


def test_the_bench_builds_and_searches_every_scope_exactly(
    backend_db: Path | str, tmp_path: Path
) -> None:
    where = (
        ["--db", str(backend_db), "--postgres-only"]
        if is_postgres(backend_db)
        else ["--db", str(tmp_path / "bench.db")]
    )
    rows = cells(run_bench(*where))
    labels = [label for label, _ in rows]
    assert labels[0] == "unscoped"
    for kind in ("tag", "meta", "path"):
        assert [label for label in labels if label.startswith(kind)] == [
            f"{kind} 0.1%",
            f"{kind} 1%",
            f"{kind} 10%",
        ]
    assert all(recall == pytest.approx(1.0) for _, recall in rows), rows
    # Reused with another vocabulary (the same count of documents), the corpus is refused:
    # queries drawn from other words, and recall measured against another corpus, otherwise.
    other = [*SMALL_RUN[:3], "3000", *SMALL_RUN[4:]]
    refused = run_bench(*where, small_run=other)
    assert refused.returncode != 0
    assert "was built from another corpus" in refused.stderr, refused.stderr[-3000:]
