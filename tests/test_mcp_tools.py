"""The MCP tools in-process through the SDK client: every non-query mode, the listings and the
error contract, pinned with snapshots (query mode: tests/test_mcp_query.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client, MCPError
from syrupy.assertion import SnapshotAssertion

from kbmcp import __version__
from kbmcp.server import tools as tools_module
from kbmcp.server.app import build_server
from kbmcp.service import memories
from tests.id_support import test_id
from tests.mcp_support import NOTES, RUNBOOK, hash_workspace, payload
from tests.ranked_output import stable

pytestmark = pytest.mark.anyio

HANDBOOK = test_id("knowledge_base", test_id("tenant", "local"), "handbook")
RESEARCH = test_id("knowledge_base", test_id("tenant", "local"), "research")


async def call(
    client: Client, tool: str, arguments: dict[str, Any] | None = None
) -> dict[str, Any]:
    return payload(await client.call_tool(tool, arguments or {}))


async def ids(client: Client) -> dict[str, str]:
    """Public ids by path, from the listing (not recomputed here, so a change is visible)."""
    page = await call(client, "list_documents")
    return {doc["path"]: doc["document_id"] for doc in page["documents"]}


# ------------------------------------------------------------------ server and schemas


async def test_server_identity_and_instructions(client: Client) -> None:
    assert client.server_info is not None
    assert (client.server_info.name, client.server_info.version) == ("kbmcp", __version__)
    instructions = client.instructions or ""
    assert "Scope first" in instructions and "outline=true" in instructions


async def test_tools_list_schemas_are_valid_and_stable(
    client: Client, snapshot_json: SnapshotAssertion
) -> None:
    listed = (await client.list_tools()).tools
    for tool in listed:
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema["type"] == tool.output_schema["type"] == "object"
        assert tool.annotations is not None
        # Only the memory tools write; every other tool says it is read-only.
        assert tool.annotations.read_only_hint is (tool.name not in {"remember", "forget"})
    search = next(t for t in listed if t.name == "search_knowledge")
    assert "candidates" not in search.input_schema["properties"]  # a hidden tuning knob
    assert search.input_schema.get("required", []) == []
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]
    assert dumped == snapshot_json


# ------------------------------------------------------------------ listings


async def test_list_knowledge_bases(client: Client, snapshot_json: SnapshotAssertion) -> None:
    result = await call(client, "list_knowledge_bases")
    assert [kb["name"] for kb in result["knowledge_bases"]] == ["handbook", "research"]
    assert result["knowledge_bases"][0]["knowledge_base_id"] == HANDBOOK
    assert result["knowledge_bases"][0]["document_count"] == 3
    assert result == snapshot_json


async def test_list_documents(client: Client, snapshot_json: SnapshotAssertion) -> None:
    result = await call(client, "list_documents")
    paths = [doc["path"] for doc in result["documents"]]
    assert paths[0] == "ops/oncall.md"  # updated last
    assert len(paths) == 5 and result["next_cursor"] is None
    assert result == snapshot_json


async def test_list_documents_pages_and_filters(client: Client) -> None:
    first = await call(client, "list_documents", {"limit": 2})
    assert len(first["documents"]) == 2 and first["next_cursor"]
    rest = await call(client, "list_documents", {"cursor": first["next_cursor"], "limit": 10})
    everything = await call(client, "list_documents")
    assert first["documents"] + rest["documents"] == everything["documents"]
    ops = await call(client, "list_documents", {"path_prefix": "ops/"})
    assert sorted(d["path"] for d in ops["documents"]) == ["ops/oncall.md", "ops/runbook.md"]
    tagged = await call(client, "list_documents", {"tags": {"tag": "runbook"}})
    assert [d["path"] for d in tagged["documents"]] == ["ops/runbook.md"]
    in_kb = await call(client, "list_documents", {"knowledge_base_ids": [HANDBOOK]})
    assert {d["knowledge_base_id"] for d in in_kb["documents"]} == {HANDBOOK}
    assert len(in_kb["documents"]) == 3


# ------------------------------------------------------------------ targeted read and outline


def without_source(result: dict[str, Any], corpus_file: Path) -> dict[str, Any]:
    """The result with `source` (an absolute path under the test's temporary folder) made
    relative to the corpus folder, so a snapshot is the same on every run."""
    root = str(corpus_file.parent.resolve())
    assert result["source"].startswith(root + "/"), result["source"]
    return {**result, "source": result["source"].removeprefix(root)}


async def test_read_window(
    client: Client, corpus_file: Path, snapshot_json: SnapshotAssertion
) -> None:
    runbook = (await ids(client))["ops/runbook.md"]
    result = await call(
        client, "search_knowledge", {"document_id": runbook, "offset": 0, "limit_chars": 300}
    )
    assert result["request_mode"] == "read"
    assert result["content"] == RUNBOOK[:300]
    assert result["content_truncated"] and result["next_offset"] == 300
    assert without_source(result, corpus_file) == snapshot_json


async def test_reads_say_where_the_text_comes_from(client: Client, corpus_file: Path) -> None:
    runbook = (await ids(client))["ops/runbook.md"]
    for arguments in ({"document_id": runbook}, {"document_id": runbook, "outline": True}):
        result = await call(client, "search_knowledge", arguments)
        assert (result["knowledge_base_id"], result["knowledge_base_name"]) == (
            HANDBOOK,
            "handbook",
        )
        assert result["owner_tenant"] == "local"
        assert result["owner_tenant_id"] == test_id("tenant", "local")
        assert result["source"] == str(corpus_file.parent.resolve() / "handbook/ops/runbook.md")


async def test_read_and_outline_list_the_revisions(client: Client) -> None:
    oncall = (await ids(client))["ops/oncall.md"]
    newer, older = test_id("revision", oncall, 2), test_id("revision", oncall, 1)
    for arguments in ({"document_id": oncall}, {"document_id": oncall, "outline": True}):
        result = await call(client, "search_knowledge", arguments)
        listed = [(r["revision_id"], r["revision_number"], r["is_current"])
                  for r in result["revisions"]]  # fmt: skip
        assert listed == [(newer, 2, True), (older, 1, False)]
        assert result["revisions_truncated"] is False
        assert all(len(r["sha256"]) == 64 and r["created_at"] for r in result["revisions"])
    # An agent pins a revision it found in the list, without holding a citation.
    pinned = await call(client, "search_knowledge", {"document_id": oncall, "revision_id": older})
    assert "fifteen minutes" in pinned["content"] and not pinned["is_current_revision"]
    assert pinned["revisions"][1]["sha256"] == pinned["revision_sha256"]


async def test_at_most_100_revisions_are_listed_newest_first(tmp_path: Path) -> None:
    with hash_workspace(tmp_path / "kb.db") as ws:
        owner = ws.local_principal()
        memory = memories.remember(ws, owner, "version 0").memory_id
        for version in range(1, 101):
            memories.remember(ws, owner, f"version {version}", memory_id=memory)
        async with Client(build_server(ws)) as client:
            result = await call(client, "search_knowledge", {"document_id": memory})
    assert [r["revision_number"] for r in result["revisions"]] == list(range(101, 1, -1))
    assert result["revisions_truncated"] is True
    assert result["revisions"][0]["is_current"] and result["content"] == "version 100"


async def test_a_read_checks_the_document_lies_in_knowledge_base_ids(client: Client) -> None:
    runbook = (await ids(client))["ops/runbook.md"]
    for outline in (False, True):
        inside = await call(
            client, "search_knowledge",
            {"document_id": runbook, "knowledge_base_ids": [HANDBOOK], "outline": outline},
        )  # fmt: skip
        assert inside["document_id"] == runbook
        outside = await call(
            client, "search_knowledge",
            {"document_id": runbook, "knowledge_base_ids": [RESEARCH], "outline": outline},
        )  # fmt: skip
        assert outside["error"]["code"] == "resource_unavailable"
        assert outside["error"]["details"]["argument"] == "document_id"
        assert outside["error"]["details"]["knowledge_base_ids"] == [RESEARCH]


async def test_read_follows_next_offset_to_the_end(client: Client) -> None:
    runbook = (await ids(client))["ops/runbook.md"]
    text, offset = "", 0
    while offset is not None:
        window = await call(
            client,
            "search_knowledge",
            {"document_id": runbook, "offset": offset, "limit_chars": 250},
        )
        text += window["content"]
        offset = window["next_offset"]
    assert text == RUNBOOK


async def test_read_older_revision(client: Client) -> None:
    oncall = (await ids(client))["ops/oncall.md"]
    current = await call(client, "search_knowledge", {"document_id": oncall})
    assert current["revision_number"] == 2 and "ten minutes" in current["content"]
    older_id = test_id("revision", oncall, 1)
    older = await call(client, "search_knowledge", {"document_id": oncall, "revision_id": older_id})
    assert older["revision_number"] == 1 and not older["is_current_revision"]
    assert "fifteen minutes" in older["content"]


async def test_outline_then_read_one_section(
    client: Client, corpus_file: Path, snapshot_json: SnapshotAssertion
) -> None:
    runbook = (await ids(client))["ops/runbook.md"]
    tree = await call(client, "search_knowledge", {"document_id": runbook, "outline": True})
    assert tree["request_mode"] == "outline"
    assert [s["title"] for s in tree["sections"]] == [
        "Database runbook",
        "Backups",
        "Restore",
        "Key rotation",
    ]
    assert without_source(tree, corpus_file) == snapshot_json
    restore = tree["sections"][2]
    section = await call(
        client,
        "search_knowledge",
        {
            "document_id": runbook,
            "offset": restore["char_start"],
            "limit_chars": restore["char_end"] - restore["char_start"],
        },
    )
    assert section["content"].startswith("### Restore")
    assert "pg_restore" in section["content"] and "Key rotation" not in section["content"]


async def test_outline_of_plain_text_is_empty(client: Client) -> None:
    notes = (await ids(client))["notes.txt"]
    tree = await call(client, "search_knowledge", {"document_id": notes, "outline": True})
    assert tree["sections"] == [] and tree["content_total_chars"] > 0


# ------------------------------------------------------------------ chunk fetch


async def test_fetch_chunks_with_missing(client: Client, snapshot_json: SnapshotAssertion) -> None:
    runbook = (await ids(client))["ops/runbook.md"]
    revision = test_id("revision", runbook, 1)
    wanted = [test_id("chunk", revision, 1), test_id("chunk", revision, 0)]
    unknown = "chk_0000000000000000"
    result = await call(client, "search_knowledge", {"chunk_ids": [*wanted, unknown, wanted[0]]})
    assert result["request_mode"] == "fetch"
    assert [c["chunk_id"] for c in result["chunks"]] == wanted  # order asked, de-duplicated
    assert result["missing"] == [unknown]
    for chunk in result["chunks"]:
        cite = chunk["citation"]
        assert RUNBOOK[cite["char_start"] : cite["char_end"]] == chunk["text"]
        # A fragment, and it says so: the revision is longer than the chunk.
        assert chunk["revision_total_chars"] == len(RUNBOOK)
        assert chunk["covers_whole_revision"] is False
    assert result == snapshot_json


async def test_a_chunk_that_is_its_whole_revision_says_so(client: Client) -> None:
    notes = (await ids(client))["notes.txt"]
    chunk_id = test_id("chunk", test_id("revision", notes, 1), 0)
    (chunk,) = (await call(client, "search_knowledge", {"chunk_ids": [chunk_id]}))["chunks"]
    assert chunk["covers_whole_revision"] is True
    assert chunk["revision_total_chars"] == len(NOTES) and chunk["text"] == NOTES.strip()


# ------------------------------------------------------------------ scan


async def test_scan_recent(client: Client, snapshot_json: SnapshotAssertion) -> None:
    result = await call(client, "search_knowledge", {"limit": 3})
    assert result["request_mode"] == "scan"
    assert next(r["path"] for r in result["results"]) == "ops/oncall.md"
    assert result["has_more"] and not result["limit_clamped"]
    assert result == snapshot_json


async def test_scan_window_filters_and_clamp(client: Client) -> None:
    window = await call(
        client, "search_knowledge", {"since": "2026-01-02", "until": "2026-01-03T00:00:00Z"}
    )
    assert sorted(r["path"] for r in window["results"]) == ["notes.txt", "papers/vectors.md"]
    assert window["since"] == "2026-01-02T00:00:00.000000Z"
    scoped = await call(
        client,
        "search_knowledge",
        {"knowledge_base_ids": [HANDBOOK], "document_paths": ["guides/"]},
    )
    assert [r["path"] for r in scoped["results"]] == ["guides/search.md"]
    tagged = await call(client, "search_knowledge", {"metadata": {"owner": "infra"}})
    assert [r["path"] for r in tagged["results"]] == ["ops/runbook.md"]
    oncall = (await ids(client))["ops/oncall.md"]
    by_alias = await call(client, "search_knowledge", {"knowledge_ids": [oncall]})
    assert [r["document_id"] for r in by_alias["results"]] == [oncall]
    clamped = await call(client, "search_knowledge", {"limit": 500})
    assert clamped["limit"] == 100 and clamped["limit_clamped"] and len(clamped["results"]) == 5


async def test_scan_sorts_by_update_or_creation(client: Client) -> None:
    """ops/oncall.md was added at T0 and changed at T2; the research documents were added at T1.
    since/until window the time the scan is sorted by."""
    updated = await call(client, "search_knowledge", {"limit": 10})
    created = await call(client, "search_knowledge", {"sort": "created_desc", "limit": 10})
    assert (updated["sort"], created["sort"]) == ("updated_desc", "created_desc")
    assert updated["results"][0]["path"] == "ops/oncall.md"
    assert sorted(r["path"] for r in created["results"][:2]) == ["notes.txt", "papers/vectors.md"]
    assert [r["created_at"] for r in created["results"]] == sorted(
        (r["created_at"] for r in created["results"]), reverse=True
    )
    oncall = next(r for r in created["results"] if r["path"] == "ops/oncall.md")
    assert oncall["created_at"] < oncall["updated_at"]
    since = {"since": "2026-01-02"}
    recently_updated = await call(client, "search_knowledge", since)
    recently_created = await call(client, "search_knowledge", {**since, "sort": "created_desc"})
    assert {r["path"] for r in recently_updated["results"]} == {
        "ops/oncall.md", "notes.txt", "papers/vectors.md"
    }  # fmt: skip
    assert {r["path"] for r in recently_created["results"]} == {"notes.txt", "papers/vectors.md"}


# ------------------------------------------------------------------ errors

DOC = "doc_0123456789abcdef"  # well-formed, exists nowhere
ERROR_CASES: dict[str, tuple[str, dict[str, Any], str, str]] = {
    # name: (tool, arguments, expected code, expected details.argument)
    "query_with_document_id": (
        "search_knowledge",
        {"query": "x", "document_id": DOC},
        "invalid_request",
        "document_id",
    ),
    "query_with_chunk_ids": (
        "search_knowledge",
        {"query": "x", "chunk_ids": ["chk_0000000000000000"]},
        "invalid_request",
        "chunk_ids",
    ),
    "query_with_since": (
        "search_knowledge",
        {"query": "x", "since": "2026-01-01"},
        "invalid_request",
        "since",
    ),
    "read_with_chunk_ids": (
        "search_knowledge",
        {"chunk_ids": ["chk_0000000000000000"], "document_id": DOC},
        "invalid_request",
        "document_id",
    ),
    "revision_without_document": (
        "search_knowledge",
        {"revision_id": "rev_0123456789abcdef"},
        "invalid_request",
        "revision_id",
    ),
    "read_with_limit": (
        "search_knowledge",
        {"document_id": DOC, "limit": 5},
        "invalid_request",
        "limit",
    ),
    "outline_with_offset": (
        "search_knowledge",
        {"document_id": DOC, "outline": True, "offset": 10},
        "invalid_request",
        "offset",
    ),
    "limit_chars_zero": (
        "search_knowledge",
        {"document_id": DOC, "limit_chars": 0},
        "invalid_request",
        "limit_chars",
    ),
    "limit_chars_too_big": (
        "search_knowledge",
        {"document_id": DOC, "limit_chars": 10001},
        "invalid_request",
        "limit_chars",
    ),
    "negative_offset": (
        "search_knowledge",
        {"document_id": DOC, "offset": -1},
        "invalid_request",
        "offset",
    ),
    "offset_not_integer": (
        "search_knowledge",
        {"document_id": DOC, "offset": "ten"},
        "invalid_request",
        "offset",
    ),
    "malformed_document_id": (
        "search_knowledge",
        {"document_id": "doc_123"},
        "invalid_request",
        "document_id",
    ),
    "wrong_kind_of_id": (
        "search_knowledge",
        {"document_id": "chk_0123456789abcdef"},
        "invalid_request",
        "document_id",
    ),
    "read_unknown_knowledge_base": (
        "search_knowledge",
        {"document_id": DOC, "knowledge_base_ids": ["kb_0123456789abcdef"]},
        "resource_unavailable",
        "knowledge_base_ids",
    ),
    "read_malformed_knowledge_base_ids": (
        "search_knowledge",
        {"document_id": DOC, "knowledge_base_ids": ["handbook"]},
        "invalid_request",
        "knowledge_base_ids",
    ),
    "read_with_document_paths": (
        "search_knowledge",
        {"document_id": DOC, "document_paths": ["ops/"]},
        "invalid_request",
        "document_paths",
    ),
    "unknown_document": (
        "search_knowledge",
        {"document_id": DOC},
        "resource_unavailable",
        "document_id",
    ),
    "empty_chunk_ids": ("search_knowledge", {"chunk_ids": []}, "invalid_request", "chunk_ids"),
    "too_many_chunk_ids": (
        "search_knowledge",
        {"chunk_ids": [f"chk_{i:016x}" for i in range(51)]},
        "invalid_request",
        "chunk_ids",
    ),
    "malformed_chunk_id": (
        "search_knowledge",
        {"chunk_ids": ["chk_nothex"]},
        "invalid_request",
        "chunk_ids",
    ),
    "empty_query": ("search_knowledge", {"query": "  "}, "query_required", "query"),
    "mode_without_query": ("search_knowledge", {"mode": "semantic"}, "query_required", "mode"),
    "both_document_id_aliases": (
        "search_knowledge",
        {"document_ids": [DOC], "knowledge_ids": [DOC]},
        "invalid_request",
        "knowledge_ids",
    ),
    "empty_document_ids": (
        "search_knowledge",
        {"document_ids": []},
        "invalid_request",
        "document_ids",
    ),
    "too_many_document_ids": (
        "search_knowledge",
        {"document_ids": [f"doc_{i:016x}" for i in range(101)]},
        "invalid_request",
        "document_ids",
    ),
    "scan_unknown_document": (
        "search_knowledge",
        {"document_ids": [DOC]},
        "resource_unavailable",
        "document_ids",
    ),
    "scan_unknown_knowledge_base": (
        "search_knowledge",
        {"knowledge_base_ids": ["kb_0123456789abcdef"]},
        "resource_unavailable",
        "knowledge_base_ids",
    ),
    "scan_bad_since": ("search_knowledge", {"since": "last tuesday"}, "invalid_request", "since"),
    "scan_since_after_until": (
        "search_knowledge",
        {"since": "2026-02-01", "until": "2026-01-01"},
        "invalid_request",
        "since",
    ),
    "scan_limit_zero": ("search_knowledge", {"limit": 0}, "invalid_request", "limit"),
    "scan_unknown_sort": ("search_knowledge", {"sort": "oldest"}, "invalid_request", "sort"),
    "sort_in_query_mode": (
        "search_knowledge",
        {"query": "x", "sort": "created_desc"},
        "invalid_request",
        "sort",
    ),
    "include_content_in_scan": (
        "search_knowledge",
        {"include_content": True},
        "query_required",
        "include_content",
    ),
    "limit_chars_without_include_content": (
        "search_knowledge",
        {"query": "x", "limit_chars": 100},
        "invalid_request",
        "limit_chars",
    ),
    "include_content_not_bool": (
        "search_knowledge",
        {"query": "x", "include_content": "yes"},
        "invalid_request",
        "include_content",
    ),
    "include_content_window_too_big": (
        "search_knowledge",
        {"query": "x", "include_content": True, "limit_chars": 10_001},
        "invalid_request",
        "limit_chars",
    ),
    "tags_not_an_object": ("search_knowledge", {"tags": ["runbook"]}, "invalid_request", "tags"),
    "unknown_argument": ("search_knowledge", {"querry": "typo"}, "invalid_request", "querry"),
    "hidden_candidates_argument": (
        "search_knowledge",
        {"query": "x", "candidates": 1},
        "invalid_request",
        "candidates",
    ),
    # A fusion parameter of another mode would do nothing: an error naming both.
    "rrf_k_in_hybrid": (
        "search_knowledge",
        {"query": "x", "mode": "hybrid", "rrf_k": 30},
        "invalid_request",
        "rrf_k",
    ),
    "alpha_in_rrf": (
        "search_knowledge",
        {"query": "x", "mode": "rrf", "alpha": 0.3},
        "invalid_request",
        "alpha",
    ),
    "alpha_in_keyword": (
        "search_knowledge",
        {"query": "x", "mode": "keyword", "alpha": 0.3},
        "invalid_request",
        "alpha",
    ),
    "alpha_and_rrf_k_without_mode": (
        "search_knowledge",
        {"query": "x", "alpha": 0.3, "rrf_k": 30},
        "invalid_request",
        "alpha",
    ),
    "rrf_k_2_63": ("search_knowledge", {"query": "x", "rrf_k": 2**63}, "invalid_request", "rrf_k"),
    # Errors name the argument as the caller sent it.
    "empty_knowledge_ids": (
        "search_knowledge",
        {"query": "x", "knowledge_ids": []},
        "invalid_request",
        "knowledge_ids",
    ),
    "malformed_knowledge_ids": (
        "search_knowledge",
        {"query": "x", "knowledge_ids": ["doc_123"]},
        "invalid_request",
        "knowledge_ids",
    ),
    "unknown_knowledge_ids": (
        "search_knowledge",
        {"query": "x", "knowledge_ids": [DOC]},
        "resource_unavailable",
        "knowledge_ids",
    ),
    "knowledge_ids_of_excluded_documents": (
        "search_knowledge",
        {"knowledge_ids": [DOC], "include_documents": False},
        "invalid_request",
        "knowledge_ids",
    ),
    # An unknown argument that is a known name of the same thing elsewhere gets a suggestion.
    "max_results": (
        "search_knowledge",
        {"query": "x", "max_results": 3},
        "invalid_request",
        "max_results",
    ),
    "knowledge_base_id": (
        "search_knowledge",
        {"query": "x", "knowledge_base_id": "kb_x"},
        "invalid_request",
        "knowledge_base_id",
    ),
    "knowledge_item_id": (
        "search_knowledge",
        {"knowledge_item_id": DOC},
        "invalid_request",
        "knowledge_item_id",
    ),
    "knowledge_revision_id": (
        "search_knowledge",
        {"document_id": DOC, "knowledge_revision_id": "rev_0123456789abcdef"},
        "invalid_request",
        "knowledge_revision_id",
    ),
    "vector_ids": (
        "search_knowledge",
        {"vector_ids": ["chk_0000000000000000"]},
        "invalid_request",
        "vector_ids",
    ),
    "list_documents_max_results": (
        "list_documents",
        {"max_results": 5},
        "invalid_request",
        "max_results",
    ),
    "list_documents_unknown_kb": (
        "list_documents",
        {"knowledge_base_ids": ["kb_0123456789abcdef"]},
        "resource_unavailable",
        "knowledge_base_ids",
    ),
    "list_documents_bad_cursor": (
        "list_documents",
        {"cursor": "nope"},
        "invalid_request",
        "cursor",
    ),
    "list_documents_limit_too_big": ("list_documents", {"limit": 201}, "invalid_request", "limit"),
    "list_documents_tags_not_an_object": (
        "list_documents",
        {"tags": ["tag"]},
        "invalid_request",
        "tags",
    ),
    "list_knowledge_bases_argument": (
        "list_knowledge_bases",
        {"name": "x"},
        "invalid_request",
        "name",
    ),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
async def test_errors(client: Client, case: str, snapshot_json: SnapshotAssertion) -> None:
    tool, arguments, code, argument = ERROR_CASES[case]
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    body = payload(result)
    assert (body["error"]["code"], body["error"]["details"].get("argument")) == (code, argument)
    assert body == snapshot_json


SUGGESTED = {
    "max_results": "limit",
    "knowledge_base_id": "knowledge_base_ids",
    "knowledge_item_id": "document_id",
    "knowledge_revision_id": "revision_id",
    "vector_ids": "chunk_ids",
    "unknown_argument": "query",  # querry: a near miss
    "list_documents_max_results": "limit",
}


@pytest.mark.parametrize("case", sorted(SUGGESTED))
async def test_unknown_arguments_get_the_name_to_use(client: Client, case: str) -> None:
    tool, arguments, _, argument = ERROR_CASES[case]
    error = payload(await client.call_tool(tool, arguments))["error"]
    assert error["details"]["suggestions"] == {argument: SUGGESTED[case]}
    assert f"did you mean {SUGGESTED[case]}?" in error["message"]


async def test_fusion_parameters_select_their_mode(client: Client) -> None:
    """rrf_k without a mode is an rrf search and alpha a hybrid one, exactly as if the mode had
    been given; the response reports the parameter that was used and null for the other."""
    query = "restore a database backup"
    by_rrf_k = await call(client, "search_knowledge", {"query": query, "rrf_k": 5})
    explicit = await call(client, "search_knowledge", {"query": query, "mode": "rrf", "rrf_k": 5})
    assert (by_rrf_k["mode"], by_rrf_k["rrf_k"], by_rrf_k["alpha"]) == ("rrf", 5, None)
    assert stable(by_rrf_k) == stable(explicit)
    by_alpha = await call(client, "search_knowledge", {"query": query, "alpha": 0.2})
    assert (by_alpha["mode"], by_alpha["alpha"], by_alpha["rrf_k"]) == ("hybrid", 0.2, None)
    plain = await call(client, "search_knowledge", {"query": query})
    assert (plain["mode"], plain["alpha"], plain["rrf_k"]) == ("hybrid", 0.5, None)
    scores = [[hit["score"] for hit in r["results"]] for r in (by_alpha, plain)]
    assert scores[0] != scores[1]  # alpha was used, not ignored


async def test_fusion_parameter_of_another_mode_names_both(client: Client) -> None:
    error = payload(
        await client.call_tool("search_knowledge", {"query": "x", "mode": "hybrid", "rrf_k": 30})
    )["error"]
    assert error["details"]["arguments"] == ["rrf_k", "mode"]
    assert "rrf_k" in error["message"] and "'hybrid'" in error["message"]


async def test_an_unknown_tool_is_a_json_rpc_error(client: Client) -> None:
    """The MCP specification: an unknown tool is a protocol error (-32602), not a tool result."""
    with pytest.raises(MCPError) as caught:
        await client.call_tool("delete_everything", {})
    assert caught.value.error.code == -32602
    assert "delete_everything" in caught.value.error.message


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 discover; 2025 initialize
async def test_only_served_capabilities_are_declared(corpus_db: Path | str, mode: str) -> None:
    """No logging (no log notifications are sent), no subscriptions (resources are read on
    request; the tool list never changes during a connection), on both protocol eras; resources
    are announced because they are served (tests/test_mcp_resources.py)."""
    with hash_workspace(corpus_db) as ws:
        async with Client(build_server(ws), mode=mode) as client:
            capabilities = client.server_capabilities
            assert capabilities is not None
            declared = capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert declared == {
        "completions": {},
        "prompts": {"listChanged": False},
        "resources": {"subscribe": False, "listChanged": False},
        "tools": {"listChanged": False},
    }


def _type_arrays(schema: Any, where: str = "") -> list[str]:
    """Where a schema uses a list as "type" (strict checkers want anyOf)."""
    found = []
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            found.append(where)
        for key, value in schema.items():
            found += _type_arrays(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found += _type_arrays(value, f"{where}/{index}")
    return found


async def test_input_schemas_are_strict_and_say_what_is_required(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name, tool in tools.items():
        assert _type_arrays(tool.input_schema) == [], name
    metadata = tools["search_knowledge"].input_schema["properties"]["metadata"]
    assert [option["type"] for option in metadata["additionalProperties"]["anyOf"]] == [
        "string", "number", "boolean", "null"
    ]  # fmt: skip
    required = {name: tool.input_schema.get("required", []) for name, tool in tools.items()}
    assert required == {
        "search_knowledge": [],
        "list_knowledge_bases": [],
        "list_documents": [],
        "list_memory_stores": [],
        "remember": ["content"],
        "forget": ["memory_id"],
    }
    missing = payload(await client.call_tool("remember", {"tags": {"topic": "x"}}))["error"]
    assert (missing["code"], missing["details"]["argument"]) == ("invalid_request", "content")


async def test_crash_becomes_internal_error(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(tools_module.listing, "list_knowledge_bases", explode)
    body = payload(await client.call_tool("list_knowledge_bases", {}))
    assert body["error"]["code"] == "internal_error"
    assert "boom" not in body["error"]["message"]  # crash details stay in the server log


INVALID_QUERIES = {
    "alpha_out_of_range": {"query": "x", "alpha": 1.5},
    "unknown_mode": {"query": "x", "mode": "fuzzy"},
    "rrf_k_zero": {"query": "x", "rrf_k": 0},
    "rrf_k_past_the_bound": {"query": "x", "rrf_k": 10_001},
    "rrf_k_2_63": {"query": "x", "rrf_k": 2**63},
    "rrf_k_2_64": {"query": "x", "mode": "rrf", "rrf_k": 2**64},
    "min_similarity_text": {"query": "x", "min_similarity": "high"},
    "limit_negative": {"query": "x", "limit": -3},
    "malformed_kb_id": {"query": "x", "knowledge_base_ids": ["handbook"]},
    "empty_paths": {"query": "x", "document_paths": []},
    "metadata_nested": {"query": "x", "metadata": {"owner": {"team": "infra"}}},
    "query_not_text": {"query": 42},
}


@pytest.mark.parametrize("case", sorted(INVALID_QUERIES))
async def test_invalid_query_never_reaches_retrieval(
    client: Client, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("retrieval ran for an invalid request")

    monkeypatch.setattr("kbmcp.service.search.run_search", must_not_run)
    body = payload(await client.call_tool("search_knowledge", INVALID_QUERIES[case]))
    assert body["error"]["code"] == "invalid_request"
