"""The PostgreSQL ranking's plans for scale (kbmcp/store/postgres/plan_choice.py) give the exact
plan's results: a scope's postings read by ranges of chunk ids, chunk by chunk or token by
token, and the bounded keyword plan of large unscoped searches when its lists hold every
posting. Each is forced on the small rich corpus and compared with SQLite, response for
response."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kbmcp.access import Principal, readable_ids
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.store import copy
from kbmcp.store.postgres import plan_choice
from kbmcp.store.postgres.scope import ScopeRuns, runs_of
from kbmcp.workspace import Workspace
from tests.postgres_search import (
    FILTERS,
    QUERIES,
    build_rich_corpus,
    pg_hits,
    pg_response,
    principal_of,
    sqlite_hits,
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[tuple]:
    """The rich corpus in PostgreSQL (copied, HNSW index built) and the local tenant's view of
    it in a file (the SQLite reference)."""
    root = tmp_path_factory.mktemp("pg-plans")
    build_rich_corpus(root / "all", root / "all.db", view="all")
    build_rich_corpus(root / "local", root / "local.db", view="local")
    copy.copy_store(str(root / "all.db"), postgres_url, force=True)
    pg = Workspace(Settings(db=postgres_url, embedder="hash"), embedder=HashingEmbedder())
    reference = Workspace(
        Settings(db=root / "local.db", embedder="hash"), embedder=HashingEmbedder()
    )
    try:
        yield pg, reference
    finally:
        pg.close()
        reference.close()


@pytest.fixture(autouse=True)
def _pruning_on_small_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop-word pruning from 5 rows on, on both backends (as test_postgres_ranking.py)."""
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 5)


def _compare(stores: tuple, mode: str, filters: SearchFilters) -> set[str | None]:
    """Every query at two depths on both backends; the PostgreSQL keyword strategies seen."""
    pg, reference = stores
    principal, alone = principal_of(pg, None), principal_of(reference, None)
    seen: set[str | None] = set()
    compared = 0
    for query in QUERIES:
        for depth in (None, 2):
            request = SearchRequest(query=query, mode=mode, limit=8, candidates=depth,
                                    filters=filters)  # fmt: skip
            want = sqlite_hits(reference, alone, request)
            assert pg_hits(pg, principal, request) == want, (query, depth)
            seen.add(pg_response(pg, principal, request).stats.lexical_strategy)
            compared += len(want)
    assert compared > 0
    return seen


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize("reads", ["scope_ranges", "scope_chunks", "scope_tokens"])
@pytest.mark.parametrize("filters", FILTERS[2:], ids=["path", "tag", "metadata"])
def test_scope_postings_read_either_way(
    stores: tuple,
    mode: str,
    reads: str,
    filters: SearchFilters,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scope's postings by range (each token's postings in each run of the scope's ids), by
    chunk (each scope chunk's postings of the query's tokens) or by token (each token's postings
    joined to the scope): the same rows, the same scores."""
    chosen: list[bool] = []

    def forced(scope: ScopeRuns | None, postings: int, tokens: int, indexed_rows: int) -> str:
        chosen.append(scope is not None)
        return reads if scope is not None else "searched"

    monkeypatch.setattr(plan_choice, "choose_token_reads", forced)
    _compare(stores, mode, filters)
    assert True in chosen  # the forced reads served scoped searches


def test_token_reads_follow_the_cheapest_side() -> None:
    one_run = runs_of([1], [10_000])  # 10,000 consecutive chunks
    scattered = runs_of([], [], range(1, 20_001, 2))  # 10,000 chunks, none adjacent
    assert plan_choice.choose_token_reads(None, 10**6, 3, 10**5) == "searched"
    assert plan_choice.choose_token_reads(one_run, 10**5, 3, 10**5) == "scope_ranges"
    assert plan_choice.choose_token_reads(scattered, 10**6, 10, 10**6) == "scope_chunks"
    assert plan_choice.choose_token_reads(scattered, 10**4, 10, 10**6) == "scope_tokens"


def test_scope_runs_merge_adjacent_ids() -> None:
    runs = runs_of([20, 1, 8], [29, 5, 9], [7, 6, 40])
    assert (runs.lo.tolist(), runs.hi.tolist()) == ([1, 20, 40], [9, 29, 40])
    assert (runs.rows, runs.runs) == (20, 3)
    assert runs.ids().tolist() == [*range(1, 10), *range(20, 30), 40]
    empty = runs_of([], [])
    assert (empty.rows, empty.runs, empty.ids().tolist()) == (0, 0, [])


def test_scope_runs_never_span_two_stores() -> None:
    """Adjacent ids of two stores stay two runs (a run is read as a range of one store's rows);
    the runs are ordered by store, then id."""
    runs = runs_of([1, 4, 10], [3, 6, 12], [7], stores=[5, 9, 5], single_stores=[5])
    assert list(zip(runs.store.tolist(), runs.lo.tolist(), runs.hi.tolist(), strict=True)) == [
        (5, 1, 3), (5, 7, 7), (5, 10, 12), (9, 4, 6),
    ]  # fmt: skip
    assert runs.ids().tolist() == [1, 2, 3, 4, 5, 6, 7, 10, 11, 12]
    assert runs.stores() == [5, 9]
    assert runs.of_store(9).lo.tolist() == [4] and runs.of_store(9).rows == 3


@pytest.mark.parametrize("mode", ["lexical", "hybrid", "rrf"])
def test_the_bounded_plan_is_exact_when_its_lists_hold_every_posting(
    stores: tuple, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unscoped searches forced onto the large-search plans (bounded keyword lists, HNSW
    vectors) with lists longer than any token's postings: SQLite's results exactly, and the
    bounded strategy reported."""
    monkeypatch.setattr(plan_choice, "VECTOR_EXACT_MAX_ROWS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_MIN_POSTINGS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_LIST_SIZE", 10**6)
    seen = _compare(stores, mode, SearchFilters())
    assert "postings_bounded" in seen


def test_the_bounded_lists_grow_with_the_searched_rows() -> None:
    """A fixed list is a smaller share of a larger index: from the floor (kept up to 125,000
    rows, the 100k bench's lists unchanged) by one posting per BOUNDED_ROWS_PER_LISTED rows
    (8,000 at a million: unscoped hybrid recall@10 0.892 -> 0.950 there, docs/scale-out.md)."""
    sizes = [plan_choice.bounded_list_size(rows) for rows in (0, 20_001, 100_000, 125_000)]
    assert sizes == [plan_choice.BOUNDED_LIST_SIZE] * 4 == [1000] * 4
    assert plan_choice.bounded_list_size(1_000_000) == 8000
    grown = [plan_choice.bounded_list_size(rows) for rows in range(0, 5_000_000, 50_000)]
    assert grown == sorted(grown)


def test_the_rescored_candidates_grow_with_the_searched_rows() -> None:
    """From the floor (kept up to 500,000 rows: the 100k bench unchanged) by one per depth per
    BOUNDED_ROWS_PER_RESCORED rows (8 at a million: unscoped hybrid recall@10 0.925 -> 0.953
    there on the checked vectors, docs/scale-out.md)."""
    floor = [plan_choice.bounded_rescored_per_depth(rows) for rows in (0, 100_000, 500_000)]
    assert floor == [plan_choice.BOUNDED_RESCORED_PER_DEPTH] * 3 == [4] * 3
    assert plan_choice.bounded_rescored_per_depth(1_000_000) == 8
    grown = [plan_choice.bounded_rescored_per_depth(r) for r in range(0, 5_000_000, 50_000)]
    assert grown == sorted(grown)


def test_a_bounded_search_reads_lists_of_each_stores_size(
    stores: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each searched store's lists are sized by that store's own rows, not the floor and not
    the searched total (eight stores of 125,000 would each read a million's lists); the
    candidates scored exactly, all the stores' together, by the searched total."""
    pg, _ = stores
    monkeypatch.setattr(plan_choice, "VECTOR_EXACT_MAX_ROWS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_MIN_POSTINGS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_ROWS_PER_LISTED", 1)  # a list per row
    monkeypatch.setattr(plan_choice, "BOUNDED_LIST_SIZE", 1)
    sized_by: list[int] = []
    real = plan_choice.bounded_list_size
    monkeypatch.setattr(
        plan_choice, "bounded_list_size", lambda rows: sized_by.append(rows) or real(rows)
    )
    rescored_by: list[int] = []
    real_rescored = plan_choice.bounded_rescored_per_depth
    monkeypatch.setattr(
        plan_choice,
        "bounded_rescored_per_depth",
        lambda rows: rescored_by.append(rows) or real_rescored(rows),
    )
    principal = principal_of(pg, None)
    request = SearchRequest(query="page", mode="lexical", limit=20, candidates=2)
    assert pg_response(pg, principal, request).stats.lexical_strategy == "postings_bounded"
    store_rows = dict(pg.conn.execute("SELECT knowledge_base_id, rows FROM keyword_total"))
    searched = sum(store_rows[store] for store in _searched_stores(pg, principal))
    assert len(sized_by) > 1  # several stores searched, a list size each
    assert sorted(sized_by) == sorted(store_rows[s] for s in _searched_stores(pg, principal))
    assert searched not in sized_by
    assert rescored_by == [searched]


def _searched_stores(pg: Workspace, principal: Principal) -> list[int]:
    """The stores an unscoped search of `principal` reads that hold indexed rows (its readable
    knowledge bases and memory stores)."""
    readable = readable_ids(pg.store, pg.conn, principal)
    held = {row[0] for row in pg.conn.execute("SELECT knowledge_base_id FROM keyword_total")}
    return sorted(readable & held)


def test_the_bounded_plan_takes_the_best_postings_first(
    stores: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one posting per token and store, a one-word search's keyword candidates are the
    token's best posting of each store by impact (the order the lists are read in)."""
    pg, _ = stores
    monkeypatch.setattr(plan_choice, "VECTOR_EXACT_MAX_ROWS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_MIN_POSTINGS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_LIST_SIZE", 1)
    principal = principal_of(pg, None)
    request = SearchRequest(query="page", mode="lexical", limit=20, candidates=2)
    response = pg_response(pg, principal, request)
    assert response.stats.lexical_strategy == "postings_bounded"
    best = pg.conn.execute(
        "SELECT DISTINCT ON (p.knowledge_base_id) c.public_id FROM chunk_term AS p"
        " JOIN chunk AS c ON c.id = p.chunk_id"
        " WHERE p.token = 'page' ORDER BY p.knowledge_base_id, p.impact DESC"
    ).fetchall()
    readable = {r.chunk_id for r in response.results}
    assert readable and readable <= {public_id for (public_id,) in best}


def test_plans_are_chosen_by_size() -> None:
    big = plan_choice.VECTOR_EXACT_MAX_ROWS + 1
    many = plan_choice.BOUNDED_MIN_POSTINGS + 1
    assert plan_choice.choose_lexical_plan(False, big, [many], 10) == "bounded"
    assert plan_choice.choose_lexical_plan(True, big, [many], 10) == "postings"  # scoped: exact
    assert plan_choice.choose_lexical_plan(False, big - 1, [many], 10) == "postings"
    assert plan_choice.choose_lexical_plan(False, big, [5, 5], 10) == "postings"
    assert plan_choice.choose_vector_plan(False, big, True) == "hnsw"
    assert plan_choice.choose_vector_plan(True, big, True) == "exact"
    assert plan_choice.choose_vector_plan(False, big, False) == "exact"
