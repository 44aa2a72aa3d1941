"""search_knowledge query mode through MCP.

NEEDS THE SEARCH ENGINE: these tests call kbmcp/service/search.py, which is built on the
`search` branch. On the `mcp` branch alone they fail with ModuleNotFoundError; they run once
the lead merges both branches. Their snapshots are then created with
`pytest tests/test_mcp_query.py --snapshot-update` and reviewed (see docs/tools.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from syrupy.assertion import SnapshotAssertion

from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths
from tests.id_support import test_id
from tests.mcp_support import (
    HttpServer,
    build_corpus,
    connect,
    hash_workspace,
    payload,
    pinned_clock,
    write,
)
from tests.ranked_output import stable

pytestmark = pytest.mark.anyio

HANDBOOK = test_id("knowledge_base", test_id("tenant", "local"), "handbook")
RUNBOOK_DOC = test_id("document", HANDBOOK, "ops/runbook.md")


async def query(client: Client, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool("search_knowledge", arguments)
    body = payload(result)
    assert not result.is_error, body
    assert body["request_mode"] == "query"
    return body


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "semantic", "rrf", "keyword"])
async def test_query_modes(client: Client, mode: str, snapshot_json: SnapshotAssertion) -> None:
    result = await query(client, query="restore a database backup", mode=mode, limit=3)
    assert result["mode"] == ("lexical" if mode == "keyword" else mode)
    assert 1 <= len(result["results"]) <= 3 == result["stats"]["limit"]
    for hit in result["results"]:
        assert hit["kind"] == "document"
        assert hit["citation"]["path"] == hit["path"]
        assert hit["citation"]["revision_id"] == hit["revision_id"]
    assert stable(result) == snapshot_json


async def test_query_with_filters(client: Client, snapshot_json: SnapshotAssertion) -> None:
    result = await query(
        client,
        query="pages",
        knowledge_base_ids=[HANDBOOK],
        document_paths=["ops/"],
        tags={"tag": "runbook"},
        metadata={"owner": "infra"},
    )
    assert {hit["document_id"] for hit in result["results"]} <= {RUNBOOK_DOC}
    assert stable(result) == snapshot_json


async def test_query_knowledge_ids_alias(client: Client) -> None:
    by_name = await query(client, query="backups", document_ids=[RUNBOOK_DOC])
    by_alias = await query(client, query="backups", knowledge_ids=[RUNBOOK_DOC])
    assert stable(by_alias) == stable(by_name)
    assert {hit["document_id"] for hit in by_name["results"]} == {RUNBOOK_DOC}


async def test_limit_above_100_is_clamped_and_reported(client: Client) -> None:
    result = await query(client, query="database", limit=500)
    assert result["stats"]["limit"] == 100 and result["stats"]["limit_clamped"] is True


async def test_unknown_scope_is_resource_unavailable(client: Client) -> None:
    result = await client.call_tool(
        "search_knowledge", {"query": "x", "document_ids": ["doc_0123456789abcdef"]}
    )
    assert result.is_error and payload(result)["error"]["code"] == "resource_unavailable"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_query_same_over_transports(transport: str, corpus_db: Path) -> None:
    arguments = {"query": "on-call escalation", "limit": 5}
    async with connect("inprocess", corpus_db) as client:
        expected = stable(await query(client, **arguments))
    server = HttpServer(corpus_db) if transport == "http" else None
    try:
        async with connect(transport, corpus_db, server.url if server else None) as client:
            assert stable(await query(client, **arguments)) == expected
    finally:
        if server:
            server.stop()


# ------------------------------------------------------------------ include_content


@pytest.fixture
async def fresh_client(tmp_path: Path) -> AsyncIterator[Client]:
    """The MCP corpus in a file of this test's own (include_content tests add memories)."""
    db = tmp_path / "kb.db"
    build_corpus(tmp_path, db)
    async with connect("inprocess", db) as client:
        yield client


async def test_include_content_inlines_the_first_documents_found(fresh_client: Client) -> None:
    """Find and read in one call: the first result of each distinct document carries the same
    window a targeted read from offset 0 returns, later results of that document none."""
    plain = await query(fresh_client, query="on-call escalation", limit=10)
    found = await query(fresh_client, query="on-call escalation", limit=10, include_content=True)
    assert [hit["chunk_id"] for hit in found["results"]] == [
        hit["chunk_id"] for hit in plain["results"]
    ]  # the same ranking, only text added
    seen: set[str] = set()
    for hit in found["results"]:
        if hit["document_id"] in seen:
            assert hit["content"] is None
            continue
        seen.add(hit["document_id"])
        read = payload(
            await fresh_client.call_tool(
                "search_knowledge",
                {"document_id": hit["document_id"], "revision_id": hit["revision_id"]},
            )
        )
        window = {key: read[key] for key in hit["content"]}
        assert hit["content"] == window and window["content_offset"] == 0
    assert len(seen) >= 2 and all(hit["content"] is None for hit in plain["results"])


async def test_include_content_windows_documents_and_gives_memories_whole(
    fresh_client: Client,
) -> None:
    fact = "The on-call rota " + "is kept in the wiki and " * 20 + "changes every Monday."
    memory = payload(await fresh_client.call_tool("remember", {"content": fact}))["memory_id"]
    # Semantic mode ranks every chunk: six distinct items (five documents and the memory).
    found = await query(
        fresh_client, query="on-call rota", mode="semantic", limit=100, include_content=True,
        limit_chars=100,
    )  # fmt: skip
    carrying = [hit for hit in found["results"] if hit["content"] is not None]
    distinct = list(dict.fromkeys(hit["document_id"] for hit in found["results"]))
    assert len(distinct) == 6
    assert [hit["document_id"] for hit in carrying] == distinct[:5]  # the first five only
    for hit in carrying:
        content = hit["content"]
        if hit["document_id"] == memory:
            assert content["content"] == fact and not content["content_truncated"]
            assert content["content_limit"] == len(fact) > 100
        else:
            assert len(content["content"]) == min(100, content["content_total_chars"])
            assert content["content_truncated"] == (content["content_total_chars"] > 100)
            assert content["next_offset"] == (100 if content["content_truncated"] else None)


# ------------------------------------------------------------------ scoped-search regression
# From the search issue: with one candidate per channel, a search scoped to one low-ranking
# document must still return that document's chunk, in every mode. A filter applied after the
# candidate cut would return nothing.

LOW_TEXT = "Office plants are watered on Fridays; a backup of the watering rota is on the wiki.\n"
STRONG_TEXT = (
    "# Database backup {n}\n\nDatabase backup and restore: the database backup runs nightly, "
    "and a restore of the database backup is tested weekly.\n"
)


@pytest.fixture(scope="module")
def regression_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("regression")
    files = {f"strong/backup-{n:02d}.md": STRONG_TEXT.format(n=n) for n in range(30)}
    files["weak/plants.md"] = LOW_TEXT
    corpus = write(root / "docs", files)
    db = root / "kb.db"
    with hash_workspace(db) as ws, pinned_clock("2026-01-01T00:00:00Z"):
        add_paths(ws, ws.local_principal(), [corpus], IngestOptions(knowledge_base="regression"))
        # A memory that matches the query better than the low document: a document filter must
        # keep it out (a memory has no document id), not let it take the one candidate slot.
        memories.remember(ws, ws.local_principal(), STRONG_TEXT.format(n="memory"))
    return db


@pytest.fixture(scope="module")
def candidates_one_server(regression_db: Path) -> Iterator[HttpServer]:
    server = HttpServer(regression_db, KBMCP_SEARCH_CANDIDATES="1")
    try:
        yield server
    finally:
        server.stop()


async def test_scoped_search_regression_over_http(candidates_one_server: HttpServer) -> None:
    kb = test_id("knowledge_base", test_id("tenant", "local"), "regression")
    low_doc = test_id("document", kb, "weak/plants.md")
    low_chunk = test_id("chunk", test_id("revision", low_doc, 1), 0)
    async with Client(candidates_one_server.url) as client:
        unscoped = await query(client, query="database backup restore", mode="lexical", limit=1)
        assert unscoped["results"][0]["document_id"] != low_doc  # it really ranks low
        for mode in ["hybrid", "lexical", "semantic", "rrf"]:
            for argument in ["document_ids", "knowledge_ids"]:
                result = await query(
                    client, query="database backup restore", mode=mode, limit=1,
                    **{argument: [low_doc]},
                )  # fmt: skip
                assert [hit["chunk_id"] for hit in result["results"]] == [low_chunk], mode
