"""Never "database is locked" (issue 20, item 3): every ingest write transaction is bounded
(KBMCP_WRITE_BATCH_CHUNKS chunks), a document larger than that is written in parts and appears
at once when its revision is switched, an interrupted one resumes, and a writer that must wait
for another process says so and keeps waiting."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.search.models import SearchRequest
from kbmcp.service.admin import reembed
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.search import search
from kbmcp.store.sqlite import connection
from kbmcp.store.sqlite.connection import open_connection, write_transaction
from kbmcp.store.sqlite.vectors import VEC_TABLE
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace
from tests import processes
from tests.index_checks import indexed_state
from tests.mcp_support import REPO_ROOT
from tests.patience import ceiling, wait_until

BOUND = 40  # chunks per write transaction in these tests


def big_document(sections: int, word: str = "heron") -> str:
    """About 2 chunks per section (1,000-character chunks)."""
    body = [f"# Field notes of the {word}\n"]
    for number in range(sections):
        line = " ".join(f"{word}{number % 7} wades through reed bed {number}" for _ in range(30))
        body.append(f"## Section {number}\n\n{line}\n\n{line.upper()}\n")
    return "\n".join(body)


class ProbeEmbedder(DelegatingEmbedder):
    """Calls `probe` before every embedding call (outside any transaction of this process)."""

    def __init__(self) -> None:
        super().__init__(HashingEmbedder())
        self.probe = lambda: None
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.probe()
        self.texts += len(texts)
        return self.inner.embed(texts)


@contextlib.contextmanager
def transaction_sizes(workspace: Workspace, sizes: list[int]) -> Iterator[None]:
    """Records how many chunk rows each write transaction of the workspace's store inserted."""
    store = workspace.store
    real = store.write_transaction

    @contextlib.contextmanager
    def counting(conn: Any) -> Iterator[Any]:
        with real(conn):
            before = conn.execute("SELECT count(*) FROM chunk").fetchone()[0]
            yield conn
            sizes.append(conn.execute("SELECT count(*) FROM chunk").fetchone()[0] - before)

    store.write_transaction = counting  # type: ignore[method-assign]
    try:
        yield
    finally:
        del store.write_transaction  # the class's method again


def lexical_paths(db: Path, word: str) -> list[str]:
    """The documents another process's keyword search finds now."""
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as other:
        request = SearchRequest(word, mode="lexical", limit=5)
        return sorted({r.path for r in search(other, other.local_principal(), request).results})


def test_a_huge_document_is_written_in_bounded_parts_and_appears_at_once(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a-small.md").write_text("# Small\n\nA small note about egrets.\n")  # first
    (folder / "huge.md").write_text(big_document(120))
    db = tmp_path / "kb.db"
    embedder = ProbeEmbedder()
    seen_during: list[list[str]] = []
    settings = Settings(db=db, embedder="hash", write_batch_chunks=BOUND)
    with Workspace(settings, embedder=embedder) as workspace:
        sizes: list[int] = []
        embedder.probe = lambda: seen_during.append(lexical_paths(db, "wades"))
        with transaction_sizes(workspace, sizes):
            report = add_paths(workspace, workspace.local_principal(), [folder])
        chunks = workspace.conn.execute("SELECT count(*) FROM indexed_chunk").fetchone()[0]
        assert report.added == 2 and report.chunks_indexed == chunks > 5 * BOUND
        # every transaction wrote at most BOUND chunks: the parts, then a switch writing none
        assert max(sizes) <= BOUND and sum(sizes) == chunks
        # until the switch, other processes saw nothing of it; now they see it
        assert len(seen_during) > 5 and all(paths == [] for paths in seen_during)
        assert lexical_paths(db, "wades") == ["huge.md"]
        # listed nowhere while written: no staged revision is left
        assert workspace.conn.execute("SELECT count(*) FROM staged_revision").fetchone() == (0,)

        # an edit: the old text stays searchable until the new revision is switched in, and
        # only the changed chunks are embedded again
        (folder / "huge.md").write_text(
            big_document(120).replace("Section 7\n", "Section 7 ibis\n")
        )
        embedder.texts = 0
        seen_during.clear()
        embedder.probe = lambda: seen_during.append(
            lexical_paths(db, "heron0") + lexical_paths(db, "ibis")
        )
        report = add_paths(workspace, workspace.local_principal(), [folder])
        assert report.updated == 1 and 0 < embedder.texts <= 4
        assert seen_during and all(paths == ["huge.md"] for paths in seen_during)  # old only
        assert lexical_paths(db, "ibis") == ["huge.md"]
    indexed_state(db)  # indexes and chunks agree, integrity checks pass


def test_parts_and_one_transaction_give_the_same_index(tmp_path: Path) -> None:
    """The switch indexes with set-based SQL; the result equals the plain path's, row for row
    (FTS5 token counts per column, vectors, search scores)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "huge.md").write_text(big_document(60))
    states = []
    for bound, name in ((BOUND, "parts.db"), (100_000, "whole.db")):
        settings = Settings(db=tmp_path / name, embedder="hash", write_batch_chunks=bound)
        with Workspace(settings, embedder=HashingEmbedder()) as workspace:
            add_paths(workspace, workspace.local_principal(), [folder])
            conn = workspace.conn
            states.append(
                (
                    conn.execute(
                        "SELECT c.ordinal, s.sz FROM chunk_fts_docsize AS s "
                        "JOIN chunk AS c ON c.id = s.id ORDER BY c.ordinal"
                    ).fetchall(),
                    conn.execute(
                        "SELECT c.ordinal, v.embedding FROM chunk_vector AS v "
                        "JOIN chunk AS c ON c.id = v.chunk_id ORDER BY c.ordinal"
                    ).fetchall(),
                    [
                        (r.citation.char_start, r.lexical_score, r.semantic_similarity, r.score)
                        for r in search(
                            workspace,
                            workspace.local_principal(),
                            SearchRequest("heron3 wades reed", mode="hybrid", limit=20),
                        ).results
                    ],
                )
            )
    assert states[0] == states[1]
    assert len(states[0][0]) > 2 * BOUND


class Interrupted(BaseException):
    """A kill in the middle (not an Exception: nothing catches it)."""


def test_an_interrupted_huge_document_resumes(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "huge.md").write_text(big_document(100))
    db = tmp_path / "kb.db"
    settings = Settings(db=db, embedder="hash", write_batch_chunks=BOUND)
    embedder = ProbeEmbedder()
    calls = 0

    def kill_on_the_fourth_call() -> None:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise Interrupted

    embedder.probe = kill_on_the_fourth_call
    with Workspace(settings, embedder=embedder) as workspace:
        with pytest.raises(Interrupted):
            add_paths(workspace, workspace.local_principal(), [folder])
        staged = workspace.conn.execute("SELECT count(*) FROM staged_revision").fetchone()[0]
        written = workspace.conn.execute("SELECT count(*) FROM chunk").fetchone()[0]
        assert staged == 1 and written >= BOUND
        assert lexical_paths(db, "wades") == []  # not visible, not half-indexed
        embedder.texts = 0
        report = add_paths(workspace, workspace.local_principal(), [folder])
        total = workspace.conn.execute("SELECT count(*) FROM indexed_chunk").fetchone()[0]
        assert report.added == 1 and embedder.texts == total - written  # resumed, not redone
        assert workspace.conn.execute("SELECT count(*) FROM chunk").fetchone()[0] == total
    assert lexical_paths(db, "wades") == ["huge.md"]
    indexed_state(db)


def test_a_writer_that_must_wait_says_so_and_keeps_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 100)
    db = tmp_path / "kb.db"
    holder = open_connection(db)
    waiter = open_connection(db)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release_later() -> None:
        time.sleep(1.0)
        holder.execute("COMMIT")
        released.set()

    threading.Thread(target=release_later).start()
    with (
        caplog.at_level(logging.WARNING, logger="kbmcp.store.sqlite.connection"),
        write_transaction(waiter),
    ):
        waiter.execute("CREATE TABLE t (x)")
    assert released.is_set()
    waits = [r.getMessage() for r in caplog.records if "waiting for another process" in r.message]
    assert waits and str(db) in waits[0]
    holder.close()
    waiter.close()


# The other process: remembers every 0.2 s until told to stop, then prints what happened. Its
# busy timeout is cut to 0.3 s, so a write transaction of this process longer than that, which a
# writer did not wait out, would be a failure.
REMEMBERER = """
import json, sys, time
from pathlib import Path
from kbmcp.store.sqlite import connection
connection.BUSY_TIMEOUT_MS = 300
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.service.memories import remember
from kbmcp.workspace import Workspace
db, stop = Path(sys.argv[1]), Path(sys.argv[2])
done, failures, slowest = 0, [], 0.0
with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
    principal = ws.local_principal()
    Path(sys.argv[3]).write_text("ready")
    while not stop.exists():
        started = time.monotonic()
        try:
            remember(ws, principal, f"note {done} taken at {time.time()}")
            done += 1
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.2)
print(json.dumps({"done": done, "failures": failures, "slowest": slowest}))
"""


def test_remembering_every_200ms_while_a_huge_document_is_added_and_reembedded(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "huge.md").write_text(big_document(1500))  # ~3,000 chunks
    db = tmp_path / "kb.db"
    settings = Settings(db=db, embedder="hash", write_batch_chunks=200)
    with Workspace(settings, embedder=HashingEmbedder()) as workspace:
        workspace.ensure_model()
        stop, ready = tmp_path / "stop", tmp_path / "ready"
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        other = processes.popen(
            [sys.executable, "-c", REMEMBERER, str(db), str(stop), str(ready)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            wait_until(lambda: ready.exists() or other.poll() is not None, 60, "the other process")
            assert other.poll() is None, other.communicate()
            report = add_paths(workspace, workspace.local_principal(), [folder])
            assert report.chunks_indexed > 2500
            interleaved = memories_committed_between_the_adds_batches(workspace)
            result = reembed(workspace, workspace.local_principal())
            assert result["chunks"] >= report.chunks_indexed
            time.sleep(0.5)
        finally:
            stop.touch()
            out, err = other.communicate(timeout=ceiling(60))
            processes.stop(other)
    assert other.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["failures"] == [], summary
    assert summary["done"] >= 3
    # The add committed in batches: a memory remembered meanwhile got a chunk id between the
    # huge document's first and last (one transaction for the whole add would leave none).
    assert interleaved >= 1, summary


def memories_committed_between_the_adds_batches(workspace: Workspace) -> int:
    """Memory chunks whose ids lie between huge.md's first and last chunk id."""
    first, last = workspace.conn.execute(
        "SELECT min(c.id), max(c.id) FROM chunk AS c JOIN revision AS r ON r.id = c.revision_id"
        " JOIN document AS d ON d.id = r.document_id WHERE d.path = 'huge.md'"
    ).fetchone()
    return int(
        workspace.conn.execute(
            "SELECT count(*) FROM chunk AS c JOIN revision AS r ON r.id = c.revision_id"
            " JOIN document AS d ON d.id = r.document_id"
            " JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id"
            " WHERE kb.kind = 'memories' AND c.id BETWEEN ? AND ?",
            (first, last),
        ).fetchone()[0]
    )


def test_reembed_stages_outside_the_lock_and_catches_documents_changed_meanwhile(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(6):
        (folder / f"n{number}.md").write_text(big_document(3, word=f"bird{number}"))
    db = tmp_path / "kb.db"
    embedder = ProbeEmbedder()
    settings = Settings(db=db, embedder="hash")
    with Workspace(settings, embedder=embedder) as workspace:
        principal = workspace.local_principal()
        add_paths(workspace, principal, [folder])
        (folder / "n5.md").unlink()
        add_paths(workspace, principal, [folder], IngestOptions(prune=True))  # one archived

        def another_process_edits() -> None:
            embedder.probe = lambda: None
            (folder / "n0.md").write_text(big_document(4, word="grebe"))  # a new revision
            with Workspace(settings, embedder=HashingEmbedder()) as other:
                add_paths(other, other.local_principal(), [folder])

        embedder.probe = another_process_edits
        result = reembed(workspace, principal)
        conn = workspace.conn
        current = conn.execute(
            "SELECT c.id, d.title, c.heading_path, c.text, d.status FROM document AS d "
            "JOIN chunk AS c ON c.revision_id = d.current_revision_id ORDER BY c.id"
        ).fetchall()
        assert result["chunks"] == len(current)
        stored = dict(conn.execute("SELECT chunk_id, embedding FROM chunk_vector").fetchall())
        expected = HashingEmbedder().embed(
            [chunk_embedding_input(t, json.loads(h), x) for _, t, h, x, _ in current]
        )
        assert sorted(stored) == [row[0] for row in current]  # exactly the current chunks
        for (chunk_id, *_), vector in zip(current, expected, strict=True):
            assert stored[chunk_id] == to_blob(vector)  # the late document's too
        indexed = {row[0] for row in conn.execute(f"SELECT rowid FROM {VEC_TABLE}")}
        assert indexed == {row[0] for row in current if row[4] == "published"}
        # the staging table was this connection's alone, and is gone
        assert conn.execute(
            "SELECT count(*) FROM temp.sqlite_schema WHERE name = 'reembed_vector'"
        ).fetchone() == (0,)
    assert lexical_paths(db, "grebe1") == ["n0.md"]
    indexed_state(db)


def test_the_write_bound_is_a_setting() -> None:
    from kbmcp.config import DEFAULT_WRITE_BATCH_CHUNKS, load_settings
    from kbmcp.errors import InvalidRequest

    assert load_settings({}).write_batch_chunks == DEFAULT_WRITE_BATCH_CHUNKS == 1000
    assert load_settings({"KBMCP_WRITE_BATCH_CHUNKS": " 250 "}).write_batch_chunks == 250
    for bad in ("0", "-3", "many", "1.5"):
        with pytest.raises(InvalidRequest, match="KBMCP_WRITE_BATCH_CHUNKS"):
            load_settings({"KBMCP_WRITE_BATCH_CHUNKS": bad})
