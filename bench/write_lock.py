"""Write-lock benchmark: a huge document and a reembed while another process remembers every
0.2 s (issue 20, item 3).

Writes one Markdown document of about --chunks chunks, starts a second process that calls
`remember` every 0.2 s (default busy timeout), then in this process adds the document and runs
`kbmcp reembed` (hashing embedder: the model is not what is measured). Prints the remembering
process's count, failures and slowest call, and this process's longest write transaction.

    python bench/write_lock.py                  # 50,000 chunks
    python bench/write_lock.py --chunks 5000    # quick

To compare with another checkout's code, put it first on the path:
`PYTHONPATH=/path/to/other/checkout python bench/write_lock.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import apsw

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service import admin, ingest, ingest_batch
from kbmcp.service.ingest import add_paths
from kbmcp.store.sqlite import connection
from kbmcp.workspace import Workspace

REMEMBERER = """
import json, sys, time
from pathlib import Path
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service.memories import remember
from kbmcp.workspace import Workspace
db, stop, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
done, failures, latencies = 0, [], []
with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
    principal = ws.local_principal()
    ready.write_text("ready")
    while not stop.exists():
        started = time.monotonic()
        try:
            remember(ws, principal, f"note {done} at {time.time()}")
            done += 1
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
        latencies.append(time.monotonic() - started)
        time.sleep(0.2)
latencies.sort()
print(json.dumps({"done": done, "failures": failures, "slowest": latencies[-1],
                  "p50": latencies[len(latencies) // 2]}))
"""


def document(chunks: int) -> str:
    """About `chunks` chunks of ~1,000 characters (two paragraphs per section)."""
    parts = ["# A very long manual\n"]
    for number in range(chunks // 2):
        line = " ".join(f"word{number % 97} manual page {number}" for _ in range(38))
        parts.append(f"## Section {number}\n\n{line}\n\n{line.upper()}\n")
    return "\n".join(parts)


@contextlib.contextmanager
def timed_transactions(durations: list[float]) -> Iterator[None]:
    """Wraps write_transaction where ingest and reembed use it, recording each one's seconds."""
    real = connection.write_transaction

    @contextlib.contextmanager
    def timed(conn: apsw.Connection) -> Iterator[apsw.Connection]:
        started = time.perf_counter()
        with real(conn):
            yield conn
        durations.append(time.perf_counter() - started)

    modules = [ingest_batch, ingest, sys.modules.get("kbmcp.service.reembed", admin)]
    saved = [(module, module.write_transaction) for module in modules]
    for module in modules:
        module.write_transaction = timed  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in saved:
            module.write_transaction = original  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        (folder / "manual.md").write_text(document(args.chunks))
        db = Path(tmp) / "kb.db"
        stop, ready = Path(tmp) / "stop", Path(tmp) / "ready"
        with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
            ws.ensure_model()
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            other = subprocess.Popen(
                [sys.executable, "-c", REMEMBERER, str(db), str(stop), str(ready)],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            while not ready.exists():
                time.sleep(0.05)
            durations: list[float] = []
            with timed_transactions(durations):
                started = time.perf_counter()
                report = add_paths(ws, ws.local_principal(), [folder])
                added = time.perf_counter() - started
                adds = len(durations)
                started = time.perf_counter()
                result = admin.reembed(ws, ws.local_principal())
                reembedded = time.perf_counter() - started
            time.sleep(0.5)
            stop.touch()
            out, _ = other.communicate(timeout=120)
        summary = json.loads(out.splitlines()[-1])
        print(f"add: {report.summary_line()} ({added:.1f} s)")
        print(
            f"  {adds} write transactions, longest {max(durations[:adds]):.2f} s"
            f" (sum {sum(durations[:adds]):.1f} s)"
        )
        print(f"reembed: {result['chunks']} chunks in {reembedded:.1f} s")
        print(f"  longest write transaction {max(durations[adds:] or [0.0]):.2f} s")
        print(
            f"remember every 0.2 s in another process: {summary['done']} done, "
            f"{len(summary['failures'])} failed, p50 {summary['p50'] * 1000:.0f} ms, "
            f"slowest {summary['slowest']:.2f} s"
        )
        for failure in summary["failures"][:5]:
            print(f"  failure: {failure}")


if __name__ == "__main__":
    main()
