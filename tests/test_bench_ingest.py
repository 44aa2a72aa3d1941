"""bench/ingest.py's PostgreSQL run: the same generated folder into a file and into an empty
database, and a clear stop (no run) on a database that already holds documents."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests import processes

BENCH = Path(__file__).resolve().parent.parent / "bench" / "ingest.py"
# A table row: where, files, chunks, then the wall and per-CPU rates.
ROW = re.compile(
    r"^ingest into (a file|PostgreSQL), hashing embedder \((\d+) files, ([\d,]+) chunks\)"
)


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, str(BENCH), *args],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_ingest_bench_writes_the_same_folder_to_a_file_and_to_postgres(
    new_postgres_url: str,
) -> None:
    done = run_bench("--files", "6", "--postgres", new_postgres_url)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [m.groups() for m in map(ROW.match, done.stdout.splitlines()) if m]
    assert [where for where, _, _ in rows] == ["a file", "PostgreSQL"]
    (_, file_files, file_chunks), (_, pg_files, pg_chunks) = rows
    assert file_files == pg_files == "6"
    assert file_chunks == pg_chunks and int(file_chunks.replace(",", "")) > 6


def test_the_ingest_bench_refuses_a_database_that_holds_documents(
    new_postgres_url: str,
) -> None:
    assert run_bench("--files", "2", "--postgres", new_postgres_url).returncode == 0
    again = run_bench("--files", "2", "--postgres", new_postgres_url)
    assert again.returncode != 0
    assert "--postgres: the database holds" in again.stderr
    assert "ingest into" not in again.stdout
