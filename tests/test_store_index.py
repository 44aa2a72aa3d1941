"""The index and vectors concerns of the store contract (kbmcp/store/index.py, vectors.py), on
both backends: a revision's chunks go into the keyword and vector indexes and come out again,
row by row or a whole revision at once, and the two backends index the same tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.store.copy import copy_store
from kbmcp.workspace import Workspace
from tests.backend_state import index_state, indexed_chunk_ids
from tests.mcp_support import build_corpus

# A published document with several chunks (a heading path on each).
CURRENT_REVISIONS = """
SELECT d.knowledge_base_id, d.title, d.current_revision_id
FROM document AS d
WHERE d.status = 'published' AND d.current_revision_id IS NOT NULL
ORDER BY d.id
"""


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("index")
    build_corpus(root, root / "kb.db")
    return root / "kb.db"


@pytest.fixture
def corpus(backend_db: Path | str, corpus_file: Path, tmp_path: Path) -> Iterator[Workspace]:
    """The MCP test corpus on the backend (PostgreSQL: copied from the file, ids unchanged)."""
    if isinstance(backend_db, Path):
        target = tmp_path / "corpus.db"
        target.write_bytes(corpus_file.read_bytes())
    else:
        copy_store(str(corpus_file), backend_db, force=True)
        target = backend_db
    ws = Workspace(Settings(db=target, embedder="hash"), embedder=HashingEmbedder())
    try:
        yield ws
    finally:
        ws.close()


def revisions(ws: Workspace) -> list[tuple[int, str, int]]:
    return [tuple(row) for row in ws.conn.execute(CURRENT_REVISIONS)]


def test_the_indexes_hold_exactly_the_current_chunks_of_published_documents(
    corpus: Workspace,
) -> None:
    state = index_state(corpus)
    indexed = indexed_chunk_ids(corpus)
    assert state["keyword_chunks"] == indexed
    assert list(state["indexed_vectors"]) == indexed
    assert {chunk_id for chunk_id, *_ in state["keywords"]} == set(indexed)


def test_chunks_out_and_back_in_give_the_same_indexes(corpus: Workspace) -> None:
    store, conn = corpus.store, corpus.conn
    before = index_state(corpus)
    for kb_id, title, revision_id in revisions(corpus):
        rows = store.index.index_rows_of_revision(conn, revision_id)
        chunk_ids = store.index.chunk_ids_of_revision(conn, revision_id)
        assert sorted(row.chunk_id for row in rows) == sorted(chunk_ids) and rows
        with store.write_transaction(conn):
            store.index.remove_from_index(conn, chunk_ids)
        out = index_state(corpus)
        assert not set(chunk_ids) & set(out["keyword_chunks"])
        assert not set(chunk_ids) & set(out["indexed_vectors"])
        assert out["stored_vectors"] == before["stored_vectors"]  # stored vectors stay
        with store.write_transaction(conn):
            store.index.add_to_index(conn, kb_id, title, rows)
        assert index_state(corpus) == before


def test_a_whole_revision_in_and_out_equals_row_by_row(corpus: Workspace) -> None:
    store, conn = corpus.store, corpus.conn
    before = index_state(corpus)
    for _kb_id, title, revision_id in revisions(corpus):
        chunk_ids = store.index.chunk_ids_of_revision(conn, revision_id)
        with store.write_transaction(conn):
            store.index.unindex_revision(conn, revision_id)
        out = index_state(corpus)
        assert not set(chunk_ids) & (set(out["keyword_chunks"]) | set(out["indexed_vectors"]))
        with store.write_transaction(conn):
            store.index.index_revision(conn, revision_id, title)
        assert index_state(corpus) == before


def test_vectors_are_stored_dropped_indexed_and_unindexed(corpus: Workspace) -> None:
    store, conn = corpus.store, corpus.conn
    kb_id, _title, revision_id = revisions(corpus)[0]
    rows = store.index.index_rows_of_revision(conn, revision_id)
    pairs = [(row.chunk_id, row.embedding) for row in rows]
    ids = [row.chunk_id for row in rows]
    before = index_state(corpus)
    with store.write_transaction(conn):
        store.vectors.unindex_vectors(conn, ids)
        store.vectors.drop_stored_vectors(conn, ids)
    gone = index_state(corpus)
    assert not set(ids) & (set(gone["indexed_vectors"]) | set(gone["stored_vectors"]))
    assert gone["keyword_chunks"] == before["keyword_chunks"]  # keywords are the index's
    with store.write_transaction(conn):
        store.vectors.store_vectors(conn, pairs)
        store.vectors.index_vectors(conn, kb_id, pairs)
    assert index_state(corpus) == before
    with store.write_transaction(conn):  # storing again replaces
        store.vectors.store_vectors(conn, pairs)
    assert index_state(corpus) == before


def test_both_backends_index_the_same_tokens_and_vectors(
    corpus_file: Path, fresh_postgres_url: str
) -> None:
    copy_store(str(corpus_file), fresh_postgres_url, force=True)
    states = []
    for db in (corpus_file, fresh_postgres_url):
        with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
            states.append(index_state(ws))
    assert states[0] == states[1]
    assert len(states[0]["keywords"]) > 100
