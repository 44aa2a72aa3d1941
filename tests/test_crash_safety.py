"""Crash safety (issue 11, item 2): `kbmcp add` killed with SIGKILL at random points, again and
again, never leaves a broken or half-indexed file.

After every kill the file opens, `PRAGMA integrity_check` and the FTS5 integrity check pass, and
every document is fully indexed at its old or its new revision: its chunks cover the revision's
text, and the keyword index (chunk_fts), the vector store (chunk_vector) and the vec0 index
(chunk_vec) hold exactly the chunks of current revisions of published documents. At the end an
ingest that is not killed completes and brings every document to its newest text.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from tests import processes
from tests.index_checks import indexed_state
from tests.mcp_support import REPO_ROOT, subprocess_env
from tests.patience import ceiling

pytestmark = pytest.mark.sqlite_only("file: crash safety (a killed writer)")

ROUNDS = 12  # at least this many edit-and-ingest rounds ...
MIN_KILLS = ROUNDS // 3  # ... and more, up to MAX_ROUNDS, until this many ingests were killed
MAX_ROUNDS = 3 * ROUNDS
FILES = 90
WORDS = [
    *("heron", "kestrel", "alpha", "beta", "gamma", "delta", "sqlite", "vector", "index"),
    *("chunk", "search", "rotate", "key", "backup", "restore", "journal", "checkpoint"),
    *("replica", "latency", "budget", "schema", "tenant", "token"),
]


def document_text(rng: random.Random, number: int, version: int) -> str:
    sections = [
        f"## Part {s}\n\n" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 260)))
        for s in range(rng.randint(1, 7))
    ]
    return f"# Document {number} v{version}\n\n" + "\n\n".join(sections) + "\n"


def ingest(db: Path, corpus: Path) -> subprocess.Popen[bytes]:
    return processes.popen(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "add", str(corpus), "--prune"],
        env=subprocess_env(db),
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def timed_ingest(db: Path, corpus: Path) -> float:
    """Seconds an uninterrupted ingest takes: kill times are drawn from the machine's pace."""
    started = time.perf_counter()
    assert ingest(db, corpus).wait(timeout=ceiling(120)) == 0
    return time.perf_counter() - started


def test_killed_ingests_leave_every_document_at_its_old_or_new_revision(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("KBMCP_CRASH_SEED", "11")))
    corpus, db = tmp_path / "corpus", tmp_path / "kb.db"
    corpus.mkdir()
    files = {f"doc{n:03}.md": document_text(rng, n, 0) for n in range(FILES)}
    for name, text in files.items():
        (corpus / name).write_text(text)
    full, idle = timed_ingest(db, corpus), timed_ingest(db, corpus)  # all files, then none
    latest = max(full, 1.5 * idle)
    kills = version = 0
    while version < ROUNDS or (kills < MIN_KILLS and version < MAX_ROUNDS):
        version += 1
        before = indexed_state(db)
        for name in rng.sample(sorted(files), k=FILES // 3):  # a third of the files change
            files[name] = document_text(rng, int(name[3:6]), version)
            (corpus / name).write_text(files[name])
        gone = rng.choice(sorted(files))  # one file is deleted (--prune archives it) ...
        del files[gone]
        (corpus / gone).unlink()
        new = f"doc{FILES + version:03}.md"  # ... and one is new
        files[new] = document_text(rng, FILES + version, version)
        (corpus / new).write_text(files[new])

        process = ingest(db, corpus)
        time.sleep(rng.uniform(0.8 * idle, latest))  # from start-up to the end
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        else:  # finished first (the machine got faster than measured): kill earlier next time
            latest = max(0.8 * idle, 0.7 * latest)
        process.wait(timeout=ceiling(120))
        processes.kill_group(process)

        after = indexed_state(db)
        for path, (status, content) in after.items():
            old = before.get(path)
            if path in files:
                assert status == "published", path
                assert (status, content) in {("published", files[path]), old}, path
            else:  # deleted: archived by this run, or not reached yet
                assert (status, content) in {("archived", content), old}, path
        assert set(before) <= set(after), "a document vanished"
    assert kills >= MIN_KILLS, f"only {kills} of {version} ingests were killed mid-way"

    final = ingest(db, corpus)
    _, stderr = final.communicate(timeout=ceiling(120))
    assert final.returncode == 0, stderr
    state = indexed_state(db)
    assert {p: c for p, (s, c) in state.items() if s == "published"} == files


def test_the_check_notices_a_half_indexed_document(tmp_path: Path) -> None:
    """The invariants above are not vacuous: an FTS row removed behind the index's back fails."""
    corpus, db = tmp_path / "corpus", tmp_path / "kb.db"
    corpus.mkdir()
    (corpus / "a.md").write_text(document_text(random.Random(1), 1, 0))
    assert ingest(db, corpus).wait(timeout=ceiling(120)) == 0
    conn = apsw.Connection(str(db))
    chunk_id = conn.execute("SELECT id FROM chunk_fts_docsize LIMIT 1").fetchone()[0]
    conn.execute("DELETE FROM chunk_fts WHERE rowid = ?", (chunk_id,))
    conn.close()
    try:
        indexed_state(db)
    except AssertionError as error:
        assert "keyword index" in str(error)
    else:
        raise AssertionError("a half-indexed document went unnoticed")
