"""The listing concern (kbmcp/store/listing.py): `kbmcp ls` and the list tools answer the same
on SQLite and on a PostgreSQL copy of the file (ids unchanged), errors included, for callers
who see different parts of the corpus: knowledge bases in byte order of their names, every page
of every filter followed cursor by cursor (documents written at one instant are keyset ties),
archived documents on request, and cursors that were not made here."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from kbmcp.access import Principal
from kbmcp.service.listing import (
    list_documents,
    list_knowledge_bases,
    resolve_knowledge_bases,
)
from kbmcp.store.listing import DocumentCursor
from kbmcp.workspace import Workspace
from tests.backend_twins import outcome, principals, twin_workspaces

UNKNOWN_KB = "kb_0000000000000000"


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[Workspace, Workspace]]:
    yield from twin_workspaces(tmp_path_factory.mktemp("listing"), postgres_url)


def cursor_of(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def every_page(ws: Workspace, principal: Principal, **arguments: Any) -> list[Any]:
    """Each page of a listing, following next_cursor to the end (or the error)."""
    pages = []
    cursor = None
    while True:
        page = outcome(partial(list_documents, ws, principal, cursor=cursor, **arguments))
        pages.append(page)
        if isinstance(page, dict) or page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_knowledge_bases_in_byte_order(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    for principal in principals(sqlite).values():
        want = outcome(partial(list_knowledge_bases, sqlite, principal))
        assert outcome(partial(list_knowledge_bases, pg, principal)) == want
    listed = list_knowledge_bases(pg, sqlite.local_principal())
    names = [kb.name for kb in listed]
    assert names == sorted(names, key=str.encode)
    assert names.index("Zeta") < names.index("alpha") < names.index("Émile")  # not a locale's
    counts = {kb.name: (kb.document_count, kb.chunk_count) for kb in listed}
    assert counts["alpha"][0] == 5  # the archived document is not counted
    assert all(chunks >= documents > 0 for documents, chunks in counts.values())


LISTINGS: dict[str, dict[str, Any]] = {
    "everything": {},
    "archived too": {"include_archived": True},
    "prefix b/": {"path_prefix": "b/"},
    "prefix B": {"path_prefix": "B"},
    "prefix with LIKE wildcards": {"path_prefix": "a_b/100%"},
    "prefix beyond ASCII": {"path_prefix": "é"},
    "prefix matching nothing": {"path_prefix": "zzz/"},
    "tags": {"tags": {"typed": "yes"}},
    "two tags": {"tags": {"typed": "yes", "Value": "int2"}},
    "unknown knowledge base": {"knowledge_base_ids": [UNKNOWN_KB]},
    "no knowledge base": {"knowledge_base_ids": []},
    "blank prefix": {"path_prefix": " "},
    "tags not an object": {"tags": ["typed"]},
    "prefix with NUL": {"path_prefix": "b/\x00"},
    "prefix with a lone surrogate": {"path_prefix": "b/\ud800"},
    "tag with NUL": {"tags": {"typed": "y\x00"}},
}


@pytest.mark.parametrize("limit", [1, 3, 200])
def test_every_page_of_every_listing_is_the_same(
    twins: tuple[Workspace, Workspace], limit: int
) -> None:
    sqlite, pg = twins
    kbs = {
        kb.name: kb.knowledge_base_id
        for kb in list_knowledge_bases(sqlite, sqlite.local_principal())
    }
    listings = {
        **LISTINGS,
        "one knowledge base": {"knowledge_base_ids": [kbs["alpha"]]},
        "two knowledge bases": {"knowledge_base_ids": [kbs["Zeta"], kbs["Émile"]]},
        "archived in one": {"knowledge_base_ids": [kbs["alpha"]], "include_archived": True},
    }
    listed = 0
    for principal in principals(sqlite).values():
        for name, arguments in listings.items():
            want = every_page(sqlite, principal, limit=limit, **arguments)
            assert every_page(pg, principal, limit=limit, **arguments) == want, name
            listed += sum(len(page.documents) for page in want if not isinstance(page, dict))
    assert listed > 0


def test_ties_and_archived_documents_are_listed_in_keyset_order(
    twins: tuple[Workspace, Workspace],
) -> None:
    sqlite, pg = twins
    owner = sqlite.local_principal()
    for ws in twins:
        pages = every_page(ws, owner, limit=1, include_archived=True)
        documents = [page.documents[0] for page in pages if page.documents]
        order = [(d.updated_at, d.document_id) for d in documents]
        # updated_at descending, then document id ascending (bytes): each page starts after
        # the last one's (updated_at, id), so ties at one instant are neither lost nor repeated.
        assert order == sorted(order, key=lambda key: (_descending(key[0]), key[1].encode()))
        everything = list_documents(ws, owner, limit=200, include_archived=True).documents
        assert len(set(order)) == len(order) == len(everything)
        assert "archived" in {d.status for d in documents}
    tied = [d.updated_at for d in list_documents(pg, owner, limit=200).documents]
    assert len(tied) > len(set(tied))  # the corpus has documents written at the same instant


def _descending(text: str) -> list[int]:
    return [-byte for byte in text.encode()]


def test_cursors_not_made_here_are_refused_alike(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    owner = sqlite.local_principal()
    first = list_documents(sqlite, owner, limit=2)
    assert first.next_cursor is not None
    cursors: list[Any] = [
        first.next_cursor,
        cursor_of(["2026-01-02T00:00:00Z", "doc_"]),  # anywhere in the order
        cursor_of(["9999", ""]),
        cursor_of(["2026-01-02T00:00:00Z\x00", "doc_"]),  # no text column holds NUL
        cursor_of(["2026", "doc_\ud800"]),  # a lone surrogate: not UTF-8
        cursor_of(["2026", 7]),
        cursor_of({"a": 1}),
        "not base64!",
        "",
        42,
    ]
    answers = []
    for cursor in cursors:
        want = outcome(partial(list_documents, sqlite, owner, cursor=cursor, limit=3))
        assert outcome(partial(list_documents, pg, owner, cursor=cursor, limit=3)) == want
        answers.append(want)
    refused = [a for a in answers if isinstance(a, dict)]
    assert {a["error"]["details"]["argument"] for a in refused} == {"cursor"}
    assert len(refused) == 6


def test_the_store_pages_from_a_cursor(twins: tuple[Workspace, Workspace]) -> None:
    """The concern itself: rows after a cursor, in the same order on both."""
    sqlite, pg = twins
    from kbmcp.access import Readable, readable_kb_ids
    from kbmcp.search.models import SearchFilters
    from kbmcp.search.scope import resolve_scope

    def rows(ws: Workspace, after: DocumentCursor | None) -> list[Any]:
        owner = ws.local_principal()
        readable = Readable(readable_kb_ids(ws.store, ws.conn, owner), None)
        scope = resolve_scope(ws.store, ws.conn, readable, SearchFilters())
        return ws.store.listing.documents(
            ws.conn, scope, include_archived=True, after=after, limit=500
        )

    everything = rows(sqlite, None)
    assert rows(pg, None) == everything
    for row in everything[::3]:
        after = DocumentCursor(row.updated_at, row.public_id)
        want = rows(sqlite, after)
        assert rows(pg, after) == want
        assert want == everything[everything.index(row) + 1 :]


def test_knowledge_bases_resolve_by_name_or_id_alike(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    kbs = list_knowledge_bases(sqlite, sqlite.local_principal())
    asked = [[kb.name for kb in kbs], [kb.knowledge_base_id for kb in kbs], ["alpha", " Zeta "],
             ["ALPHA", UNKNOWN_KB], ["beta-docs"]]  # fmt: skip
    for principal in principals(sqlite).values():
        for names in asked:
            want = outcome(partial(resolve_knowledge_bases, sqlite, principal, names))
            assert outcome(partial(resolve_knowledge_bases, pg, principal, names)) == want
