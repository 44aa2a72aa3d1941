"""The ranking on PostgreSQL gives what the SQLite engine gives on the same data: the same chunks
in the same order with the same scores (rounded as snapshots round them), per channel too, in
every mode, for scoped searches, phrases, memories with decay, and a tenant who cannot read
every store (keyword statistics over its readable set)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from pydantic_core import to_jsonable_python

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import KbError
from kbmcp.search.lexical import channel
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service.search import search
from kbmcp.store import copy
from kbmcp.store.postgres import halves, keyword
from kbmcp.store.postgres.connection import connect, read_snapshot
from kbmcp.workspace import Workspace
from tests.mcp_support import pinned_clock
from tests.postgres_search import (
    FILTERS,
    MODES,
    QUERIES,
    build_rich_corpus,
    pg_hits,
    pg_response,
    principal_of,
    sqlite_hits,
)
from tests.ranked_output import stable


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[tuple]:
    """The rich corpus in a file and, copied, in PostgreSQL; and the local tenant's and acme's
    views of it, each in a file of its own (the SQLite references: see build_rich_corpus)."""
    root = tmp_path_factory.mktemp("pg-ranking")
    paths = {view: root / f"{view}.db" for view in ("all", "local", "acme")}
    for view, path in paths.items():
        build_rich_corpus(root / view, path, view=view)
    copy.copy_store(str(paths["all"]), postgres_url, force=True)
    pg = Workspace(Settings(db=postgres_url, embedder="hash"), embedder=HashingEmbedder())
    workspaces = {
        view: Workspace(Settings(db=path, embedder="hash"), embedder=HashingEmbedder())
        for view, path in paths.items()
    }
    try:
        yield pg, workspaces
    finally:
        pg.close()
        for ws in workspaces.values():
            ws.close()


@pytest.fixture(autouse=True)
def _pruning_on_small_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    """fts.py prunes stop words from indexes of 1000 chunks on; this corpus is smaller, so the
    threshold is lowered on both backends to compare the pruned path too."""
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(
    k for k, v in vars(f).items() if v is not None) or "unscoped")  # fmt: skip
def test_same_results_as_sqlite(stores: tuple, mode: str, filters: SearchFilters) -> None:
    """The local tenant, in a database that also holds acme's and beta's stores."""
    pg, views = stores
    ws, reference = views["all"], views["local"]
    principal, alone = principal_of(ws, None), principal_of(reference, None)
    compared = 0
    for query in QUERIES:
        for depth in (None, 2):  # 2: the pruned terms find fewer rows than the depth
            request = SearchRequest(query=query, mode=mode, limit=8, candidates=depth,
                                    filters=filters)  # fmt: skip
            want = sqlite_hits(reference, alone, request)
            assert pg_hits(pg, principal, request) == want, (query, depth)
            compared += len(want)
    assert compared > 0


def test_pruning_is_exercised(stores: tuple) -> None:
    """The comparison above covers pruned queries: the statistics make a common word common."""
    pg, views = stores
    ws = views["all"]
    phrases = [(t, keyword.query_tokens(t)) for t in ("the", "index", "zanzibar")]
    stats = keyword.keyword_stats(pg.conn, phrases, principal_of_readable(ws))
    kept, dropped = keyword.prune(phrases, stats, None, 2)
    assert [t for t, _ in dropped] == ["the"] and len(kept) == 2


def principal_of_readable(ws: Workspace) -> list[int]:
    from kbmcp.access import readable

    return readable(ws.store, ws.conn, principal_of(ws, None)).all_ids


@pytest.mark.parametrize("mode", MODES)
def test_memories_decay_alike(stores: tuple, mode: str) -> None:
    pg, views = stores
    ws, reference = views["all"], views["local"]
    principal, alone = principal_of(ws, None), principal_of(reference, None)
    compared = 0
    with pinned_clock("2026-03-01T12:00:00.123456Z"):
        for query in ("vector index", "embedding model rebuilt", "TLS certificate"):
            request = SearchRequest(query=query, mode=mode, limit=8, recency_half_life_days=7,
                                    filters=SearchFilters(include_documents=False))  # fmt: skip
            want = sqlite_hits(reference, alone, request)
            assert all(hit.recency_weight is not None for hit in want)
            assert pg_hits(pg, principal, request) == want
            compared += len(want)
    assert compared > 0


def test_a_floor_spares_selected_documents_alike(stores: tuple) -> None:
    pg, views = stores
    ws, reference = views["all"], views["local"]
    principal, alone = principal_of(ws, None), principal_of(reference, None)
    first = ws.conn.execute("SELECT public_id FROM document ORDER BY id LIMIT 1").fetchone()[0]
    request = SearchRequest(
        query="vector index", mode="semantic", min_similarity=0.99,
        filters=SearchFilters(document_ids=[first], include_memories=True),
    )  # fmt: skip
    want = sqlite_hits(reference, alone, request)
    assert want  # the selected document is spared by the floor
    assert pg_hits(pg, principal, request) == want


@pytest.mark.parametrize("mode", MODES)
def test_keyword_statistics_are_the_readable_sets(stores: tuple, mode: str) -> None:
    """acme reads its own stores and one shared by beta, not the local tenant's: its scores on
    PostgreSQL (every tenant's data in one database) are SQLite's on a file that holds only
    what acme may read, where FTS5's own statistics are the readable set's."""
    pg, views = stores
    ws, acme_ws = views["all"], views["acme"]
    acme_full, acme_alone = principal_of(ws, "acme"), principal_of(acme_ws, "acme")
    compared = 0
    for query in QUERIES:
        request = SearchRequest(query=query, mode=mode, limit=8)
        want = sqlite_hits(acme_ws, acme_alone, request)
        assert pg_hits(pg, acme_full, request) == want, query
        compared += len(want)
    assert compared > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tenant", [None, "acme"])
def test_whole_responses_are_the_same(stores: tuple, mode: str, tenant: str | None) -> None:
    """Every field of a response - ids, order, scores, excerpts, citations, candidate counts,
    scope size, has_more, the filters an empty scope names - is the one SQLite gives for the
    file PostgreSQL was copied from (strategies as ranked_output.py classes them)."""
    pg, views = stores
    ws = views["all"]
    principal = principal_of(ws, tenant)
    documents = [row[0] for row in ws.conn.execute("SELECT public_id FROM document ORDER BY id")]
    filters = (
        *FILTERS,
        SearchFilters(document_paths=["nowhere/"], tags={"topic": "ops"}),
        SearchFilters(document_ids=documents[:2], include_memories=True),
        SearchFilters(metadata={"priority": "2"}),
    )
    compared = 0
    for query, scope in itertools.product(QUERIES, filters):
        with pinned_clock("2026-03-01T12:00:00Z"):  # memories decay from one moment on both
            request = SearchRequest(query=query, mode=mode, limit=5, filters=scope,
                                    min_similarity=0.1 if mode == "semantic" else None)  # fmt: skip
            try:
                want = stable(to_jsonable_python(search(ws, principal, request)))
            except KbError as error:  # e.g. documents another tenant cannot read
                with pytest.raises(type(error), match=re.escape(str(error))):
                    pg_response(pg, principal, request)
                continue
            assert stable(to_jsonable_python(pg_response(pg, principal, request))) == want
            compared += len(want["results"])
    assert compared > 0


@pytest.mark.parametrize("mode", ["hybrid", "rrf"])
@pytest.mark.parametrize("filters", FILTERS[2:], ids=("path", "tag", "metadata"))
def test_a_large_scope_runs_its_halves_on_two_connections_alike(
    stores: tuple, mode: str, filters: SearchFilters, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scope of HALVES_MIN_ROWS chunks or more runs its keyword half on the search's
    connection and its vector half on a second one in the same snapshot (halves.py): the same
    results as SQLite's, as the one-statement path gives."""
    monkeypatch.setattr(halves, "HALVES_MIN_ROWS", 1)
    pg, views = stores
    ws, reference = views["all"], views["local"]
    principal, alone = principal_of(ws, None), principal_of(reference, None)
    halves.close_helper(pg.conn)
    compared = 0
    for query in QUERIES:
        request = SearchRequest(query=query, mode=mode, limit=8, filters=filters)
        want = sqlite_hits(reference, alone, request)
        assert pg_hits(pg, principal, request) == want, query
        compared += len(want)
    assert compared > 0
    assert halves.helpers_of([pg.conn])  # the vector halves ran beside the search


def test_the_second_connection_reads_the_searchs_snapshot(postgres_url: str) -> None:
    """Rows committed by another connection after the search's snapshot was taken are not seen
    by its second half either, though the helper's own transaction begins after that commit."""
    conn = connect(postgres_url, migrate=False)
    writer = connect(postgres_url, migrate=False)
    try:
        writer.execute("CREATE TABLE IF NOT EXISTS halves_probe (n integer)")
        writer.execute("TRUNCATE halves_probe")
        writer.execute("INSERT INTO halves_probe VALUES (1)")
        count = "SELECT count(*) FROM halves_probe"
        with read_snapshot(conn):
            assert conn.execute(count).fetchone()[0] == 1  # the snapshot is taken
            writer.execute("INSERT INTO halves_probe VALUES (2)")  # committed after it
            mine, other = halves.run_halves(conn, lambda: conn.execute(count).fetchall(), count, {})
        assert mine == [(1,)] and other == [(1,)]
        assert writer.execute(count).fetchone()[0] == 2
    finally:
        halves.close_helper(conn)
        writer.execute("DROP TABLE IF EXISTS halves_probe")
        conn.close()
        writer.close()
