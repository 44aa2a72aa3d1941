"""The reads concern (kbmcp/store/reads.py) gives the same rows on SQLite and on PostgreSQL: a
document's revisions, the check of knowledge_base_ids, and chunks by id, for readable sets that
hold every store, some, or none; and so the read service (targeted reads, outlines, chunk fetch,
inlined content) answers the same on both, errors included, for callers who see different
parts of the corpus."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from kbmcp.service.read import document_outline, fetch_chunks, inline_content, read_document
from kbmcp.workspace import Workspace
from tests.backend_twins import outcome, principals, twin_workspaces

UNKNOWN_DOCUMENT = "doc_0000000000000000"
UNKNOWN_CHUNK = "chk_0000000000000000"
UNKNOWN_KB = "kb_0000000000000000"


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[Workspace, Workspace]]:
    yield from twin_workspaces(tmp_path_factory.mktemp("reads"), postgres_url)


def rows(ws: Workspace, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in ws.conn.execute(sql).fetchall()]


def readable_sets(ws: Workspace) -> list[list[int]]:
    """Every store; every other store; the first alone; none."""
    stores = [row[0] for row in rows(ws, "SELECT id FROM knowledge_base ORDER BY id")]
    return [stores, stores[::2], stores[:1], []]


def test_document_revisions(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    revisions = rows(
        sqlite,
        "SELECT d.public_id, r.public_id FROM document AS d "
        "JOIN revision AS r ON r.document_id = d.id ORDER BY r.id",
    )
    documents = list(dict.fromkeys(doc for doc, _ in revisions))
    asked = [(doc, None) for doc in [*documents, UNKNOWN_DOCUMENT]] + revisions
    asked.append((documents[0], revisions[-1][1]))  # a revision of another document
    found = []
    for readable in readable_sets(sqlite):
        for document_id, revision_id in asked:
            want = sqlite.store.reads.document_revision(
                sqlite.conn, document_id, revision_id, readable
            )
            got = pg.store.reads.document_revision(pg.conn, document_id, revision_id, readable)
            assert got == want, (document_id, revision_id, readable)
            found.append(want)
    statuses = {(row.kind, row.status, row.is_current) for row in found if row is not None}
    assert ("markdown", "archived", True) in statuses  # archived documents stay readable
    assert ("markdown", "published", False) in statuses  # an older revision
    assert any(row is None for row in found)
    # A forgotten memory is never served: the one the corpus forgot is not found.
    forgotten = rows(
        sqlite,
        "SELECT d.public_id FROM document AS d JOIN knowledge_base AS kb "
        "ON kb.id = d.knowledge_base_id WHERE kb.kind = 'memories' AND d.status = 'archived'",
    )
    assert forgotten
    everything = readable_sets(sqlite)[0]
    for (memory_id,) in forgotten:
        assert pg.store.reads.document_revision(pg.conn, memory_id, None, everything) is None


def test_revisions_newest_first(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    documents = rows(sqlite, "SELECT id FROM document ORDER BY id")
    several = 0
    for (document_row_id,) in documents:
        for limit in (1, 101):
            want = sqlite.store.reads.revisions(sqlite.conn, document_row_id, limit)
            assert pg.store.reads.revisions(pg.conn, document_row_id, limit) == want
            several += len(want) > 1
    assert several  # a document with two revisions, listed newest first
    assert pg.store.reads.revisions(pg.conn, -1, 10) == []


def test_resolve_knowledge_base_ids_in_the_order_asked(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    kbs = [row[0] for row in rows(sqlite, "SELECT public_id FROM knowledge_base ORDER BY id")]
    asked = [UNKNOWN_KB, *reversed(kbs), kbs[0]]
    for readable in readable_sets(sqlite):
        want = sqlite.store.reads.resolve_knowledge_base_ids(sqlite.conn, asked, readable)
        assert pg.store.reads.resolve_knowledge_base_ids(pg.conn, asked, readable) == want
        assert [public_id for public_id, _ in want] == asked
    assert pg.store.reads.resolve_knowledge_base_ids(pg.conn, [], readable_sets(pg)[0]) == []


def test_chunks_by_id(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    chunk_ids = [row[0] for row in rows(sqlite, "SELECT public_id FROM chunk ORDER BY id")]
    covers = set()
    for readable in readable_sets(sqlite):
        for start in range(0, len(chunk_ids), 40):
            asked = [*chunk_ids[start : start + 40], UNKNOWN_CHUNK]
            want = sqlite.store.reads.chunks(sqlite.conn, asked, readable)
            got = pg.store.reads.chunks(pg.conn, asked, readable)
            assert sorted(got, key=lambda c: c.chunk_id) == sorted(want, key=lambda c: c.chunk_id)
            covers |= {(c.covers_whole, c.store_kind, c.is_current) for c in want}
    assert {(True, "documents", True), (False, "documents", True)} <= covers
    assert (True, "memories", True) in covers
    assert any(not is_current for *_, is_current in covers)  # an older revision's chunk


def test_the_read_service_answers_the_same(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    revisions = rows(
        sqlite,
        "SELECT d.public_id, r.public_id, kb.public_id FROM document AS d "
        "JOIN revision AS r ON r.document_id = d.id "
        "JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id ORDER BY r.id",
    )
    other_kb = revisions[0][2]
    answers: list[Any] = []
    for principal in principals(sqlite).values():
        for document_id, revision_id, kb_id in [*revisions, (UNKNOWN_DOCUMENT, None, other_kb)]:
            calls: list[Callable[[Workspace], Any]] = [
                partial(read_document, principal=principal, document_id=document_id),
                partial(read_document, principal=principal, document_id=document_id,
                        revision_id=revision_id, offset=7, limit_chars=20),
                partial(read_document, principal=principal, document_id=document_id,
                        offset=10_000),
                partial(read_document, principal=principal, document_id=document_id,
                        knowledge_base_ids=[kb_id]),
                partial(read_document, principal=principal, document_id=document_id,
                        knowledge_base_ids=[other_kb, UNKNOWN_KB]),
                partial(document_outline, principal=principal, document_id=document_id,
                        revision_id=revision_id),
            ]  # fmt: skip
            if revision_id is not None:
                calls.append(
                    partial(
                        inline_content,
                        principal=principal,
                        document_id=document_id,
                        revision_id=revision_id,
                        limit_chars=30,
                    )
                )
            for call in calls:
                want = outcome(partial(call, sqlite))
                assert outcome(partial(call, pg)) == want, call
                answers.append(want)
    errors = [a["error"]["code"] for a in answers if isinstance(a, dict)]
    assert {"resource_unavailable", "forbidden"} <= set(errors)
    windows = [a for a in answers if not isinstance(a, dict)]
    assert len(windows) > 200 and any(
        getattr(a, "revisions_truncated", None) is False for a in windows
    )


def test_chunk_fetch_answers_the_same(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    chunk_ids = [row[0] for row in rows(sqlite, "SELECT public_id FROM chunk ORDER BY id DESC")]
    found = missing = 0
    for principal in principals(sqlite).values():
        for start in range(0, len(chunk_ids), 49):
            asked = [UNKNOWN_CHUNK, *chunk_ids[start : start + 49]]
            want = outcome(partial(fetch_chunks, sqlite, principal, asked))
            assert outcome(partial(fetch_chunks, pg, principal, asked)) == want
            found += len(want.chunks)
            missing += len(want.missing)
    assert found and missing
