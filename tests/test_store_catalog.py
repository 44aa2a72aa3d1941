"""The document side of the catalog concern (kbmcp/store/catalog.py) on both backends: the rows
a write makes for a document, its revisions, chunks and tags, read back the same way."""

from __future__ import annotations

import threading

import pytest

from kbmcp.clock import now_iso
from kbmcp.store.catalog import (
    ChunkWithVector,
    CurrentDocument,
    DocumentAttributes,
    DocumentState,
    NewChunk,
    NewDocument,
    NewRevision,
    StoredChunk,
    dump_json,
)
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace

NOW = "2026-03-04T05:06:07.000000Z"


def chunks(prefix: str, count: int) -> list[NewChunk]:
    return [
        NewChunk(
            public_id=f"chk_{prefix}{i:014x}",
            ordinal=i,
            heading_path=dump_json(["Title", f"Part {i}"]),
            char_start=10 * i,
            char_end=10 * i + 9,
            line_start=i + 1,
            line_end=i + 1,
            text=f"text {i} of {prefix}",
        )
        for i in range(count)
    ]


def write_document(ws: Workspace, path: str, content: str, tags: list[tuple[str, str]]) -> int:
    """A document with one revision of three chunks, as ingest writes it."""
    store, conn = ws.store, ws.conn
    catalog = store.catalog
    with store.write_transaction(conn):
        tenant = catalog.ensure_tenant(conn, "local")
        kb = catalog.ensure_knowledge_base(conn, tenant, "default")
        public_id = f"doc_{abs(hash(path)) % 16**16:016x}"
        assert not catalog.document_id_taken(conn, public_id)
        new = NewDocument(public_id, kb.id, path, "Title", "markdown", f"/src/{path}", "{}")
        document_id = catalog.insert_document(conn, new, NOW)
        assert catalog.document_id_taken(conn, public_id)
        number = catalog.next_revision_number(conn, document_id)
        revision = NewRevision(
            f"rev_{document_id:016x}", document_id, number, content, f"h:{content}",
            len(content), 1,
        )  # fmt: skip
        revision_id = catalog.insert_revision(conn, revision, NOW)
        chunk_ids = catalog.insert_chunks(conn, revision_id, chunks(f"{document_id:02x}", 3))
        store.vectors.store_vectors(
            conn, [(chunk_id, to_blob([float(chunk_id), 1.0])) for chunk_id in chunk_ids[:2]]
        )
        attributes = DocumentAttributes("Title", "markdown", f"/src/{path}",
                                        dump_json({"n": 1}), revision_id, "attrs")  # fmt: skip
        catalog.update_document(conn, document_id, attributes, NOW)
        catalog.replace_tags(conn, document_id, tags)
    return document_id


@pytest.fixture
def ws(backend_workspace: Workspace) -> Workspace:
    backend_workspace.ensure_model()
    return backend_workspace


def test_a_document_written_reads_back_alike(ws: Workspace) -> None:
    store, conn = ws.store, ws.conn
    catalog = store.catalog
    first = write_document(ws, "a.md", "alpha", [("team", "x"), ("team", "x"), ("kind", "y")])
    second = write_document(ws, "b.md", "beta", [])
    kb = catalog.find_knowledge_base(conn, catalog.ensure_tenant(conn, "local"), "default")
    assert kb is not None
    states = sorted(catalog.document_states(conn, kb.id), key=lambda s: s.path)
    assert [s.path for s in states] == ["a.md", "b.md"]
    assert states[0] == DocumentState(
        first, states[0].public_id, "a.md", "Title", "published", "/src/a.md", "attrs",
        states[0].revision_id, "h:alpha",
    )  # fmt: skip
    current = catalog.current_document(conn, kb.id, "a.md")
    assert current == CurrentDocument(
        first, states[0].public_id, "published", states[0].revision_id, "h:alpha", "attrs",
        "/src/a.md",
    )  # fmt: skip
    assert catalog.current_document(conn, kb.id, "missing.md") is None
    revision_id = states[0].revision_id
    assert revision_id is not None
    stored = catalog.stored_chunks(conn, revision_id)
    assert [c.ordinal for c in stored] == [0, 1, 2]
    assert stored[1] == StoredChunk(
        stored[1].id, 1, dump_json(["Title", "Part 1"]), 10, 19, 2, 2, f"text 1 of {first:02x}"
    )
    assert [c.id for c in stored] == sorted(c.id for c in stored)  # ids in the order given
    # consecutive: a filtered search reads a revision's chunks as one run of ids
    assert [c.id for c in stored] == list(range(stored[0].id, stored[0].id + 3))
    with_vectors = sorted(catalog.chunks_with_vectors(conn, revision_id), key=lambda c: c.text)
    assert with_vectors == [
        ChunkWithVector(c.heading_path, c.text, to_blob([float(c.id), 1.0])) for c in stored[:2]
    ]
    tags = conn.execute(
        f"SELECT key, value FROM document_tag WHERE document_id = {first} ORDER BY key"
    ).fetchall()
    assert [tuple(row) for row in tags] == [("kind", "y"), ("team", "x")]
    assert catalog.next_revision_number(conn, first) == 2
    with store.write_transaction(conn):
        catalog.archive_document(conn, second, now_iso())
        catalog.replace_tags(conn, first, [("only", "this")])
    archived = catalog.current_document(conn, kb.id, "b.md")
    assert archived is not None and archived.status == "archived"
    tags = conn.execute(f"SELECT key FROM document_tag WHERE document_id = {first}").fetchall()
    assert [row[0] for row in tags] == ["only"]


def test_a_document_being_written_is_locked_on_postgres(fresh_postgres_url: str) -> None:
    """Two servers writing one path take turns: the row `current_document` read inside a write
    transaction stays locked until that transaction ends."""
    import psycopg

    from kbmcp.config import Settings
    from kbmcp.embed.hashing import HashingEmbedder

    settings = Settings(db=fresh_postgres_url, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), create=True) as ws:
        ws.ensure_model()
        write_document(ws, "locked.md", "text", [])
        store, conn = ws.store, ws.conn
        kb_id = conn.execute("SELECT id FROM knowledge_base").fetchone()[0]
        outcome: list[BaseException | None] = []

        def other_server() -> None:
            other = store.connect()
            try:
                with store.write_transaction(other):
                    other.execute("SET LOCAL lock_timeout = '200ms'")
                    store.catalog.current_document(other, kb_id, "locked.md")
                outcome.append(None)
            except psycopg.Error as error:
                outcome.append(error)
            finally:
                store.close([other])

        with store.write_transaction(conn):
            assert store.catalog.current_document(conn, kb_id, "locked.md") is not None
            thread = threading.Thread(target=other_server)
            thread.start()
            thread.join()
        assert isinstance(outcome[0], psycopg.errors.LockNotAvailable)
        assert isinstance(outcome[0], store.database_errors)
        outcome.clear()
        other_server()  # once the first transaction ended, the row is free
        assert outcome == [None]
