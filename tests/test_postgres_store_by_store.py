"""A search over several stores run store by store (kbmcp/store/postgres/shards.py: what it does
on Citus, one router query per store, merged in Python) answers exactly what the one-statement
search answers, on one PostgreSQL server: every mode, every kind of scope, pruned terms falling
back, the similarity floor, memories with decay; a tenant reading its own stores and one
reading another tenant's shared store. The Citus tier (tests/test_citus.py) compares the same
requests on a real cluster; this one runs wherever PostgreSQL does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.store.copy import copy_store
from kbmcp.store.postgres import halves, shards
from kbmcp.workspace import Workspace
from tests.postgres_search import QUERIES, answer, build_rich_corpus, parity_requests


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("store-by-store")
    source: Path = root / "all.db"
    build_rich_corpus(root / "files", source)
    copy_store(str(source), postgres_url, force=True)
    ws = Workspace(Settings(db=postgres_url, embedder="hash"), embedder=HashingEmbedder())
    try:
        yield ws
    finally:
        ws.close()


@pytest.fixture(autouse=True)
def _pruning_on_small_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop words are pruned from 1000 indexed chunks on; this corpus is smaller, so the
    threshold is lowered to compare the pruned path and its fallback too."""
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 5)


@pytest.mark.parametrize("lanes", [1, 3], ids=("one-connection", "three-connections"))
@pytest.mark.parametrize("tenant", [None, "acme"])
def test_store_by_store_answers_as_one_statement_does(
    pg: Workspace, tenant: str | None, lanes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stores' statements one after another on the search's connection, or at once on
    it and helpers beside it (shards.STORE_LANES): the same answers."""
    monkeypatch.setattr(shards, "STORE_LANES", lanes)
    halves.close_helper(pg.conn)
    requests = list(parity_requests(pg, tenant, QUERIES[::2]))  # the tier on Citus: every one
    whole = [answer(pg, tenant, request) for request in requests]
    calls: list[SearchRequest] = []
    rank = shards.rank

    def by_store(*args: object) -> object:
        calls.append(args[1])  # type: ignore[arg-type]
        return rank(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(shards, "store_by_store", lambda conn, request: True)
    monkeypatch.setattr(shards, "rank", by_store)
    for request, want in zip(requests, whole, strict=True):
        assert answer(pg, tenant, request) == want, request
    assert len(calls) >= len(requests) // 2  # the searches that reached the ranking
    assert any(len(set(call.searched_stores)) > 1 for call in calls)  # type: ignore[attr-defined]
    assert any(isinstance(w, dict) and w["results"] for w in whole)
    assert len(halves.helpers_of([pg.conn])) == lanes - 1  # the other lanes' connections


@pytest.mark.parametrize("lanes", [1, 3], ids=("one-connection", "three-connections"))
def test_a_scope_in_no_store_answers_as_one_statement_does(
    pg: Workspace, lanes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered scope that no store holds a chunk of reaches the store-by-store ranking with
    no store to ask (the scope is read inside it): it answers as the one statement does, with
    no results, on one connection or with helpers (a refactor once left it no lane)."""
    monkeypatch.setattr(shards, "STORE_LANES", lanes)
    halves.close_helper(pg.conn)
    request = SearchRequest(
        query=QUERIES[0], mode="hybrid", filters=SearchFilters(tags={"nowhere": "at all"})
    )
    whole = answer(pg, None, request)
    jobs_seen: list[int] = []
    channel_rows = shards._channel_rows_of_stores

    def counted(conn: object, jobs: list, *args: object, **kwargs: object) -> object:
        jobs_seen.append(len(jobs))
        return channel_rows(conn, jobs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shards, "store_by_store", lambda conn, request: True)
    monkeypatch.setattr(shards, "_channel_rows_of_stores", counted)
    assert answer(pg, None, request) == whole
    assert jobs_seen == [0]  # it reached the store-by-store ranking with no store to ask
    assert isinstance(whole, dict) and whole["results"] == []
