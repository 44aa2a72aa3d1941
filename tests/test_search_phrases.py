"""Phrases: a double-quoted part of the query matches its words adjacent and in order.

On every keyword path (FTS5 in a one-shot process; the scope scan and the postings in a server;
PostgreSQL's postings) the same chunks match, with the same bm25 scores; unquoted words are
OR-ed as before; an odd quote is text, never a syntax error. The last test goes through MCP, on
both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchFilters, SearchRequest, SearchResponse
from kbmcp.search.query_text import query_terms
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.search import search
from kbmcp.store.sqlite.search import plan
from kbmcp.workspace import Workspace
from tests.mcp_support import connect, hash_workspace, payload, write
from tests.store_backends import BACKENDS, workspace_on

FILES = {
    "slo/adjacent.md": "# Reliability\n\nThe error budget is spent when the SLO burns too fast.\n",
    "slo/punctuated.md": "# Alerts\n\nError: budget exceeded, page the owner.\n",
    "slo/reversed.md": "# Finance\n\nThe budget error report lists every wrong invoice.\n",
    "slo/apart.md": "# Review\n\nAn error was found in the budget review of March.\n",
    # The title column ends with "error", the body starts with "budget": not adjacent.
    "slo/columns.md": "---\ntitle: Planning error\n---\nBudget planning starts in autumn.\n",
    "other/policy.md": "# Policy\n\nThe spending policy is reviewed yearly.\n",
}
PHRASE = '"error budget"'
# FTS5 phrase semantics: the words adjacent and in order within one column (title, heading or
# body); punctuation between them is not a token, so "Error: budget" is adjacent too.
PHRASE_MATCHES = {"slo/adjacent.md", "slo/punctuated.md"}
SCOPES = {
    "unscoped": SearchFilters(),
    "path": SearchFilters(document_paths=["slo/"]),
    "two-folders": SearchFilters(document_paths=["slo/", "other/"]),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("phrases")
    with hash_workspace(root / "kb.db") as ws:
        add_paths(
            ws, ws.local_principal(), [write(root / "docs", FILES)], IngestOptions("handbook")
        )
    return root / "kb.db"


@pytest.fixture(scope="module")
def pair(db: Path) -> Iterator[tuple[Workspace, Workspace]]:
    settings = Settings(db=db, embedder="hash")
    with (
        Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as server,
        Workspace(settings, embedder=HashingEmbedder()) as one_shot,
    ):
        yield server, one_shot


@pytest.fixture(scope="module")
def pg(db: Path, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    """The same knowledge base in PostgreSQL (a copy: the same ids)."""
    workspace = workspace_on("postgres", db, request)
    yield workspace
    workspace.close()


def _lexical(ws: Workspace, query: str, filters: SearchFilters) -> SearchResponse:
    request = SearchRequest(query, mode="lexical", limit=50, filters=filters)
    return search(ws, ws.local_principal(), request)


def _scored(response: SearchResponse) -> list[tuple[str, float | None]]:
    return [(r.path, r.lexical_score) for r in response.results]


def test_quoted_parts_are_phrase_terms() -> None:
    assert query_terms('"error budget" policy') == ["error budget", "policy"]
    assert query_terms('how  "error \n budget"  burns') == ["how", "error budget", "burns"]
    assert query_terms('"Error Budget" "error budget" error') == ["Error Budget", "error"]
    assert query_terms('"budget" budget') == ["budget"]  # a quoted word is the word
    # An odd quote is text: it stays in its word, which FTS5 then reads as a quoted string.
    assert query_terms('error "budget') == ["error", '"budget']
    assert query_terms('a "b c" d "e f') == ["a", "b c", "d", '"e', "f"]
    assert query_terms('"" " -- "') == []


@pytest.mark.parametrize("scope", list(SCOPES))
@pytest.mark.parametrize("strategy", ["scan", "postings"])
def test_a_phrase_matches_its_words_adjacent_and_in_order_on_every_path(
    pair: tuple[Workspace, Workspace],
    scope: str,
    strategy: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, one_shot = pair
    # A scope at most this size is scanned by the server; a larger one uses the postings.
    monkeypatch.setattr(plan, "LEXICAL_SCAN_MAX_ROWS", 10**6 if strategy == "scan" else 0)
    if strategy == "scan" and server.accelerator is not None:
        server.accelerator.postings.phrases.clear()  # else the warm postings are used
    filters = SCOPES[scope]
    for query in (PHRASE, f"{PHRASE} policy", '"budget error"', '"the error budget is"'):
        cached, plain = _lexical(server, query, filters), _lexical(one_shot, query, filters)
        assert plain.stats.lexical_strategy == "fts5"
        if scope != "unscoped":
            assert cached.stats.lexical_strategy == strategy
        assert _scored(cached) == _scored(plain)  # bit for bit
        assert [r.lexical_rank for r in cached.results] == [r.lexical_rank for r in plain.results]
    paths = {path for path, _ in _scored(_lexical(one_shot, PHRASE, filters))}
    assert paths == PHRASE_MATCHES
    with_word = {path for path, _ in _scored(_lexical(server, f"{PHRASE} policy", filters))}
    expected = PHRASE_MATCHES | ({"other/policy.md"} if scope != "path" else set())
    assert with_word == expected
    reversed_ = {path for path, _ in _scored(_lexical(server, '"budget error"', filters))}
    assert reversed_ == {"slo/reversed.md"}


@pytest.mark.parametrize("scope", list(SCOPES))
def test_a_phrase_matches_alike_on_postgresql(
    pair: tuple[Workspace, Workspace], pg: Workspace, scope: str
) -> None:
    _, one_shot = pair
    filters = SCOPES[scope]
    for query in (PHRASE, f"{PHRASE} policy", '"budget error"', '"the error budget is"'):
        plain, on_pg = _lexical(one_shot, query, filters), _lexical(pg, query, filters)
        assert on_pg.stats.lexical_strategy == "postings"
        assert _scored(on_pg) == _scored(plain)
        assert [r.lexical_rank for r in on_pg.results] == [r.lexical_rank for r in plain.results]
    assert {path for path, _ in _scored(_lexical(pg, PHRASE, filters))} == PHRASE_MATCHES


@pytest.mark.parametrize("query", ['error "budget', '"error budget', 'error budget"', '"'])
def test_an_odd_quote_is_text(pair: tuple[Workspace, Workspace], pg: Workspace, query: str) -> None:
    """The words around an odd quote are ordinary words (OR-ed), on every path."""
    server, one_shot = pair
    words = {path for path, _ in _scored(_lexical(one_shot, "error budget", SearchFilters()))}
    for ws in (server, one_shot, pg):
        found = {path for path, _ in _scored(_lexical(ws, query, SearchFilters()))}
        assert found == (set() if query == '"' else words)
    hybrid = search(server, server.local_principal(), SearchRequest(query))
    assert query == '"' or hybrid.results


async def _query(client: Client, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool("search_knowledge", arguments)
    body = payload(result)
    assert not result.is_error, body
    return body


@pytest.mark.anyio
@pytest.mark.parametrize("backend", BACKENDS)
async def test_phrases_through_mcp(db: Path, backend: str, request: pytest.FixtureRequest) -> None:
    target: Path | str = db
    if backend == "postgres":
        target = request.getfixturevalue("pg").settings.db
    async with connect("inprocess", target) as client:
        phrase = await _query(client, query=PHRASE, mode="lexical")
        assert {r["path"] for r in phrase["results"]} == PHRASE_MATCHES
        words = await _query(client, query="error budget", mode="lexical")
        assert {r["path"] for r in words["results"]} > PHRASE_MATCHES
        odd = await _query(client, query='error "budget', mode="lexical")
        assert {r["path"] for r in odd["results"]} == {r["path"] for r in words["results"]}
        hybrid = await _query(client, query=f"{PHRASE} policy")
        assert {r["path"] for r in hybrid["results"]} >= PHRASE_MATCHES | {"other/policy.md"}
