"""The scope SQL of both backends selects the same chunks: every filter alone and combined,
metadata's typed equality at its edges (integers and reals, trailing zeros, exponents,
booleans, null, strings that read as numbers), path prefixes with LIKE's wildcards and
characters beyond ASCII, memory tags that come from the memory or its store, archived
documents, and the filters an empty scope names. The PostgreSQL database is a `kbmcp copy` of
the SQLite file, so row ids are equal and the results are compared as they are."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.resolved import Scope
from kbmcp.service.ingest import IngestOptions, add_paths, archive_document
from kbmcp.service.memories import create_memory_store, remember
from kbmcp.store import copy
from kbmcp.store.postgres.scope import sqlite_real_text
from kbmcp.workspace import Workspace
from tests.mcp_support import hash_workspace, write

FILES = {
    "int.md": "---\nversion: 2\nowner: ops\n---\n# Int\n\nversion two as an integer\n",
    "real.md": "---\nversion: 2.0\nratio: 1.5\n---\n# Real\n\nversion two as a real\n",
    "ratio.md": "---\nratio: 1.50\nbig: 1.0e+20\n---\n# Ratio\n\ntrailing zero and exponent\n",
    "flags.md": "---\ndraft: true\ngone: null\nzero: 0\n---\n# Flags\n\nbooleans and null\n",
    "false.md": "---\ndraft: false\none: 1\n---\n# False\n\nfalse and one\n",
    "text.md": "---\nversion: '2'\ncode: '007'\nowner: Ops\n---\n# Text\n\nnumbers as text\n",
    "odd/100%_done.md": "# Percent\n\na path with LIKE's wildcards\n",
    "odd/100x_done.md": "# Near\n\nwhat the underscore would match\n",
    "odd/é/accent.md": "# Accent\n\na path beyond ASCII\n",
    "odd/z.md": "---\ntags: {team: ops, tier: gold}\n---\n# Tagged\n\ntagged document\n",
    "odd/archived.md": "---\nversion: 2\n---\n# Archived\n\nno longer searched\n",
}
METADATA_VALUES: list[Any] = [
    2, 2.0, "2", "2.0", 1.5, "1.5", "1.50", 1e20, "1.0e+20", "100000000000000000000",
    True, False, "true", "false", None, "null", 1, "1", 0, "0", "007", 7, "ops", "Ops",
    "missing",
]  # fmt: skip
METADATA_KEYS = ["version", "ratio", "big", "draft", "gone", "zero", "one", "code", "owner"]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[tuple]:
    root = tmp_path_factory.mktemp("scope-backends")
    db = root / "kb.db"
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        add_paths(ws, admin, [write(root / "docs", FILES)], IngestOptions(knowledge_base="docs"))
        add_paths(ws, admin, [write(root / "more", {"a.md": "# A\n\nanother base\n"})],
                  IngestOptions(knowledge_base="more"))  # fmt: skip
        archive_document(ws, admin, _id(ws, "SELECT public_id FROM document WHERE path = ?",
                                        "odd/archived.md"))  # fmt: skip
        store = create_memory_store(ws, admin, "journal", tags={"team": "ops"}).memory_store_id
        remember(ws, admin, "a memory of the ops team", memory_store_id=store)
        remember(ws, admin, "a gold memory", memory_store_id=store, tags={"tier": "gold"})
        remember(ws, admin, "an untagged memory elsewhere")
    copy.copy_store(str(db), postgres_url, force=True)
    sqlite = Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder())
    pg = Workspace(Settings(db=postgres_url, embedder="hash"), embedder=HashingEmbedder())
    try:
        yield sqlite, pg
    finally:
        sqlite.close()
        pg.close()


def _id(ws: Workspace, sql: str, *args: object) -> Any:
    return ws.conn.execute(sql, args).fetchone()[0]


def _stores(ws: Workspace, kind: str) -> list[int]:
    rows = ws.conn.execute("SELECT id FROM knowledge_base WHERE kind = ? ORDER BY id", (kind,))
    return [row[0] for row in rows]


def _documents(ws: Workspace) -> list[int]:
    return [row[0] for row in ws.conn.execute("SELECT id FROM document ORDER BY id")]


def _same(sqlite: Workspace, pg: Workspace, scope: Scope) -> list[int]:
    """The scope's chunks on both backends (equal), and the filters that alone select nothing."""
    want = sqlite.store.search.scope_chunk_ids(sqlite.conn, scope)
    got = pg.store.search.scope_chunk_ids(pg.conn, scope)
    assert (None if got is None else got.tolist()) == (None if want is None else want.tolist())
    empty = sqlite.store.search.empty_filters(sqlite.conn, scope)
    assert pg.store.search.empty_filters(pg.conn, scope) == empty
    return [] if want is None else want.tolist()


def _scope(sqlite: Workspace, filters: dict[str, Any], memories: bool = True) -> Scope:
    return Scope(
        _stores(sqlite, "documents"), _stores(sqlite, "memories") if memories else None, filters
    )


def test_metadata_equality_is_typed_alike(both: tuple) -> None:
    sqlite, pg = both
    selected = 0
    for key, value in itertools.product(METADATA_KEYS, METADATA_VALUES):
        selected += len(_same(sqlite, pg, _scope(sqlite, {"metadata": {key: value}})))
    assert selected > 0
    # Two keys at once: every pair must match.
    for version, owner in itertools.product([2, "2", "2.0"], ["ops", "Ops"]):
        _same(sqlite, pg, _scope(sqlite, {"metadata": {"version": version, "owner": owner}}))


def test_a_number_text_is_sqlite_s() -> None:
    assert [sqlite_real_text(v) for v in (2.0, 1.5, 1e20, 0.1, 1e-7)] == [
        "2.0", "1.5", "1.0e+20", "0.1", "1.0e-07",
    ]  # fmt: skip


def test_filters_alone_and_combined_select_alike(both: tuple) -> None:
    sqlite, pg = both
    documents = _documents(sqlite)
    filters: dict[str, list[Any]] = {
        "knowledge_base_ids": [[_stores(sqlite, "documents")[0]], _stores(sqlite, "documents")],
        "document_ids": [documents[:2], documents[-3:], [documents[0], 10**9]],
        "memory_store_ids": [_stores(sqlite, "memories")[:1], _stores(sqlite, "memories")],
        "document_paths": [
            ["odd/"], ["odd/100%"], ["odd/100_"], ["odd/é"], ["odd/é/accent.md"], ["int", "text"],
            ["zzz"], [""],
        ],
        # A resolved scope's tags are [key, value] pairs (kbmcp/search/scope.py `_tags`).
        "tags": [[["team", "ops"]], [["team", "ops"], ["tier", "gold"]], [["tier", "gold"]],
                 [["team", "nobody"]]],
        "metadata": [{"version": 2}, {"draft": True}, {"owner": "ops"}],
    }  # fmt: skip
    compared = 0
    for name, values in filters.items():
        for value in values:
            for memories in (True, False):
                compared += len(_same(sqlite, pg, _scope(sqlite, {name: value}, memories)))
    for (a, va), (b, vb) in itertools.combinations(
        [(name, values[0]) for name, values in filters.items()], 2
    ):
        _same(sqlite, pg, _scope(sqlite, {a: va, b: vb}))
    assert compared > 0


def test_archived_documents_are_outside_every_scope(both: tuple) -> None:
    sqlite, pg = both
    archived = _id(sqlite, "SELECT id FROM document WHERE path = 'odd/archived.md'")
    scope = _scope(sqlite, {"document_ids": [archived]}, memories=False)
    assert _same(sqlite, pg, scope) == []
    assert pg.store.search.empty_filters(pg.conn, scope) == ["document_ids"]


def test_whole_stores_and_nothing_alike(both: tuple) -> None:
    sqlite, pg = both
    everything = Scope(_stores(sqlite, "documents"), _stores(sqlite, "memories"), everything=True)
    assert _same(sqlite, pg, everything) == []  # None: no list at all
    assert _same(sqlite, pg, Scope(None, None)) == []
    assert len(_same(sqlite, pg, _scope(sqlite, {}))) > 0
    assert pg.store.search.count_stores(pg.conn) == sqlite.store.search.count_stores(sqlite.conn)


def test_ids_resolve_alike(both: tuple) -> None:
    sqlite, pg = both
    kbs = [row[0] for row in sqlite.conn.execute("SELECT public_id FROM knowledge_base")]
    docs = [row[0] for row in sqlite.conn.execute("SELECT public_id FROM document")]
    readable = _stores(sqlite, "documents")[:1]
    every = ([*kbs, "kb_unknown", kbs[0]], [*docs, "doc_unknown", docs[0]])
    # both kinds, each kind alone (PostgreSQL then asks for that kind only), and neither
    for kb_ids, doc_ids in (every, (every[0], []), ([], every[1]), ([], [])):
        wanted = (kb_ids, doc_ids, readable)
        got = pg.store.search.resolve_ids(pg.conn, *wanted)
        assert got == sqlite.store.search.resolve_ids(sqlite.conn, *wanted)
        assert len(got) == len(kb_ids) + len(doc_ids)
    stores = _stores(sqlite, "memories")
    assert pg.store.search.resolve_memory_store_ids(
        pg.conn, [*kbs, "mst_unknown"], stores
    ) == sqlite.store.search.resolve_memory_store_ids(sqlite.conn, [*kbs, "mst_unknown"], stores)
    documents = _documents(sqlite)
    assert (
        pg.store.search.selected_document_chunks(pg.conn, documents).tolist()
        == sqlite.store.search.selected_document_chunks(sqlite.conn, documents).tolist()
    )
