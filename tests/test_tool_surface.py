"""What tools/list promises is what the server does (issue 34): a declared default is never
refused and changes nothing, every bound the validators enforce is in the schema (and no other),
text that depends on the settings shows this server's settings, and names other servers use get
the name to use. Through the SDK client, on both backends."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.server.mcpserver import MCPServer

from kbmcp.config import MAX_RRF_K, load_settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import (
    MAX_DOCUMENT_IDS,
    MAX_FILTER_PAIRS,
    MAX_KNOWLEDGE_BASE_IDS,
    MAX_LIMIT_CHARS,
    MAX_MEMORY_STORE_IDS,
    MAX_PATH_PREFIXES,
    MAX_QUERY_CHARS,
)
from kbmcp.search.request import MAX_HALF_LIFE
from kbmcp.server import models
from kbmcp.server.app import build_server
from kbmcp.service import listing, memories, read
from kbmcp.workspace import Workspace
from tests.mcp_support import payload

pytestmark = pytest.mark.anyio


class Session:
    """One SDK client session on the module's server, usable from Hypothesis's sync tests."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client
        self.tools = {tool.name: tool for tool in portal.call(client.list_tools).tools}

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return payload(self.portal.call(self.client.call_tool, tool, arguments))


@pytest.fixture(scope="module")
def session(inprocess_server: MCPServer) -> Iterator[Session]:
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(inprocess_server)) as client,
    ):
        yield Session(portal, client)


@pytest.fixture(scope="module")
def corpus_ids(session: Session) -> dict[str, list[str]]:
    """Real ids of the corpus, from the tools themselves."""
    kbs = session.call("list_knowledge_bases", {})["knowledge_bases"]
    docs = session.call("list_documents", {})["documents"]
    hits = session.call("search_knowledge", {"query": "database on-call search", "limit": 20})
    return {
        "kb": [kb["knowledge_base_id"] for kb in kbs],
        "doc": [doc["document_id"] for doc in docs],
        "rev": [doc["current_revision_id"] for doc in docs],
        "chk": [hit["chunk_id"] for hit in hits["results"]],
        "path": [doc["path"] for doc in docs],
    }


def declared(session: Session, tool: str) -> dict[str, Any]:
    """The defaults `tool`'s input schema declares, as a client reads them."""
    properties = session.tools[tool].input_schema.get("properties", {})
    return {name: spec["default"] for name, spec in properties.items() if "default" in spec}


def without_timing(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body.get("stats", {}).pop("elapsed_ms", None)
    return body


# ------------------------------------------------------------------ 1. declared defaults

WORDS = ["database", "restore", "backup", "on-call", "pages", "vector", "search", "TLS"]


@st.composite
def valid_call(draw: st.DrawFn, ids: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    """A valid call of a read tool, in any mode of search_knowledge."""
    tool = draw(st.sampled_from(["search_knowledge", "list_documents", "list_knowledge_bases"]))
    if tool == "list_knowledge_bases":
        return tool, {}
    some = st.integers(min_value=1, max_value=20)
    if tool == "list_documents":
        args: dict[str, Any] = {}
        if draw(st.booleans()):
            args["knowledge_base_ids"] = draw(st.lists(st.sampled_from(ids["kb"]), min_size=1))
        if draw(st.booleans()):
            args["limit"] = draw(some)
        if draw(st.booleans()):
            args["path_prefix"] = draw(st.sampled_from(["ops/", "guides/", "papers/"]))
        return tool, args
    shape = draw(st.sampled_from(["query", "read", "outline", "fetch", "scan"]))
    if shape == "fetch":
        return tool, {"chunk_ids": draw(st.lists(st.sampled_from(ids["chk"]), min_size=1))}
    if shape in ("read", "outline"):
        args = {"document_id": draw(st.sampled_from(ids["doc"]))}
        if shape == "outline":
            return tool, {**args, "outline": True}
        if draw(st.booleans()):
            args["offset"] = draw(st.integers(min_value=0, max_value=900))
        if draw(st.booleans()):
            args["limit_chars"] = draw(st.integers(min_value=1, max_value=MAX_LIMIT_CHARS))
        return tool, args
    args = {}
    if draw(st.booleans()):
        args["limit"] = draw(some)
    if draw(st.booleans()):
        args["knowledge_base_ids"] = draw(st.lists(st.sampled_from(ids["kb"]), min_size=1))
    if shape == "scan":
        if draw(st.booleans()):
            args["sort"] = draw(st.sampled_from(["updated_desc", "created_desc"]))
        return tool, args
    args["query"] = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
    ranking = draw(st.sampled_from(["none", "mode", "alpha", "rrf_k"]))
    if ranking == "mode":
        args["mode"] = draw(st.sampled_from(["hybrid", "lexical", "semantic", "rrf", "keyword"]))
    elif ranking == "alpha":
        args["alpha"] = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]))
    elif ranking == "rrf_k":
        args["rrf_k"] = draw(st.integers(min_value=1, max_value=100))
    if draw(st.booleans()):
        args["include_content"] = True
        if draw(st.booleans()):
            args["limit_chars"] = draw(st.integers(min_value=1, max_value=MAX_LIMIT_CHARS))
    return tool, args


def test_every_declared_default_is_a_constant_of_a_read_tool(session: Session) -> None:
    """The write tools declare no default; search_knowledge's `mode` declares none because its
    default follows the other arguments (alpha selects hybrid, rrf_k selects rrf)."""
    assert {name: declared(session, name) for name in session.tools} == {
        "search_knowledge": {
            "alpha": 0.5,
            "limit": 10,
            "offset": 0,
            "limit_chars": read.DEFAULT_LIMIT_CHARS,
            "outline": False,
            "sort": "updated_desc",
            "include_content": False,
        },
        "list_knowledge_bases": {},
        "list_documents": {"limit": listing.DEFAULT_PAGE},
        "list_memory_stores": {},
        "remember": {},
        "forget": {},
    }
    assert "default" not in session.tools["search_knowledge"].input_schema["properties"]["mode"]


def test_spelling_out_declared_defaults_changes_nothing(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    """For generated valid calls of every read tool in every mode, adding any subset of the
    declared defaults (those the call does not already set) gives exactly the same result."""

    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(call=valid_call(corpus_ids), data=st.data())
    def run(call: tuple[str, dict[str, Any]], data: st.DataObject) -> None:
        tool, arguments = call
        plain = session.call(tool, arguments)
        assert "error" not in plain, (arguments, plain)
        addable = {k: v for k, v in declared(session, tool).items() if k not in arguments}
        chosen = data.draw(st.sets(st.sampled_from(sorted(addable))), "defaults") if addable else []
        spelled = {**arguments, **{name: addable[name] for name in chosen}}
        assert without_timing(session.call(tool, spelled)) == without_timing(plain), spelled

    run()


@pytest.mark.parametrize(
    ("arguments", "omitted"),
    [
        ({"query": "backup", "offset": 0}, {"query": "backup"}),
        ({"query": "backup", "rrf_k": 30, "alpha": 0.5}, {"query": "backup", "rrf_k": 30}),
        (
            {"query": "backup", "mode": "semantic", "alpha": 0.5, "sort": "updated_desc"},
            {"query": "backup", "mode": "semantic"},
        ),
        ({"limit": 10, "offset": 0, "outline": False}, {}),
        ({"chunk_ids": ["CHUNK"], "limit": 10, "include_content": False}, {"chunk_ids": ["CHUNK"]}),
    ],
)
def test_the_calls_the_issue_names_are_accepted(
    session: Session, corpus_ids: dict[str, list[str]], arguments: dict, omitted: dict
) -> None:
    def filled(call: dict[str, Any]) -> dict[str, Any]:
        if "chunk_ids" in call:
            return {**call, "chunk_ids": corpus_ids["chk"][:1]}
        return call

    plain = session.call("search_knowledge", filled(omitted))
    assert "error" not in plain
    assert without_timing(session.call("search_knowledge", filled(arguments))) == without_timing(
        plain
    )


def test_a_default_of_another_type_is_not_the_default(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    """`false` is not the number 0: only the declared value itself counts as not given."""
    body = session.call("search_knowledge", {"query": "backup", "offset": False})
    assert body["error"]["details"]["argument"] == "offset"
    read_body = session.call(
        "search_knowledge", {"document_id": corpus_ids["doc"][0], "offset": 0.0}
    )
    assert read_body["request_mode"] == "read" and read_body["content_offset"] == 0


# ------------------------------------------------------------------ 2. schema = validators


def ids(kind: str, count: int) -> list[str]:
    return [f"{kind}_{index:016x}" for index in range(count)]


def _pairs(count: int) -> dict[str, str]:
    return {f"k{index}": "v" for index in range(count)}


def _probes(bound: int, make: Any) -> list[Any]:
    return [make(bound), make(bound + 1)]


# (tool, argument, base call, values to probe): each probe value is checked against the schema
# and against the server. The probes sit on and just past every bound the validators enforce,
# and far past where the schema states none.
def bound_cases(doc: str) -> list[tuple[str, str, dict[str, Any], list[Any]]]:
    query = {"query": "backup"}
    read_call = {"document_id": doc}
    return [
        ("search_knowledge", "query", {}, ["x" * MAX_QUERY_CHARS, "x" * (MAX_QUERY_CHARS + 1)]),
        ("search_knowledge", "alpha", query, [-0.01, 0, 1, 1.01]),
        ("search_knowledge", "rrf_k", query, [0, 1, MAX_RRF_K, MAX_RRF_K + 1]),
        ("search_knowledge", "min_similarity", query, [-1.01, -1, 1, 1.01]),
        ("search_knowledge", "limit", query, [0, 1, 100, 101, 10**6]),
        (
            "search_knowledge",
            "recency_half_life_days",
            query,
            [-0.5, 0, MAX_HALF_LIFE, MAX_HALF_LIFE * 10],
        ),
        *[
            ("search_knowledge", name, query, [[], *_probes(limit, lambda n, k=kind: ids(k, n))])
            for name, kind, limit in [
                ("knowledge_base_ids", "kb", MAX_KNOWLEDGE_BASE_IDS),
                ("document_ids", "doc", MAX_DOCUMENT_IDS),
                ("knowledge_ids", "doc", MAX_DOCUMENT_IDS),
                ("memory_store_ids", "mst", MAX_MEMORY_STORE_IDS),
            ]
        ],
        (
            "search_knowledge",
            "document_paths",
            query,
            [[], *_probes(MAX_PATH_PREFIXES, lambda n: [f"p{i}/" for i in range(n)])],
        ),
        ("search_knowledge", "tags", query, [{}, *_probes(MAX_FILTER_PAIRS, _pairs)]),
        ("search_knowledge", "metadata", query, [{}, *_probes(MAX_FILTER_PAIRS, _pairs)]),
        ("search_knowledge", "offset", read_call, [-1, 0, 10**9]),
        (
            "search_knowledge",
            "limit_chars",
            read_call,
            [0, 1, MAX_LIMIT_CHARS, MAX_LIMIT_CHARS + 1],
        ),
        (
            "search_knowledge",
            "chunk_ids",
            {},
            [[], *_probes(read.MAX_CHUNK_IDS, lambda n: ids("chk", n))],
        ),
        ("list_documents", "limit", {}, [0, 1, listing.MAX_PAGE, listing.MAX_PAGE + 1]),
        ("list_documents", "tags", {}, [{}, *_probes(MAX_FILTER_PAIRS, _pairs)]),
        (
            "list_documents",
            "knowledge_base_ids",
            {},
            [[], *_probes(MAX_KNOWLEDGE_BASE_IDS, lambda n: ids("kb", n))],
        ),
        (
            "remember",
            "content",
            {},
            ["x" * memories.MAX_MEMORY_CHARS, "x" * (memories.MAX_MEMORY_CHARS + 1)],
        ),
        (
            "remember",
            "source",
            {"content": "a fact"},
            ["s" * memories.MAX_SOURCE_CHARS, "s" * (memories.MAX_SOURCE_CHARS + 1)],
        ),
        ("remember", "tags", {"content": "a fact"}, [{}, *_probes(memories.MAX_TAGS, _pairs)]),
    ]


def test_every_bound_of_the_validators_is_in_the_schema_and_no_other(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    """Both ways: a probe value the schema allows is not refused for that argument by the
    server, and one the server refuses for that argument the schema does not allow."""
    mismatches = []
    for tool, argument, base, values in bound_cases(corpus_ids["doc"][0]):
        validator = Draft202012Validator(session.tools[tool].input_schema)
        for value in values:
            arguments = {**base, argument: value}
            schema_allows = validator.is_valid(arguments)
            body = session.call(tool, arguments)
            error = body.get("error")
            refused = (
                error is not None
                and error["code"] in ("invalid_request", "query_required")
                and error["details"].get("argument") == argument
            )
            if schema_allows == refused:
                shown = repr(value)[:40]
                mismatches.append(f"{tool}.{argument}={shown}: schema allows {schema_allows}")
    assert mismatches == []


def test_the_schema_numbers_come_from_the_validators_constants(session: Session) -> None:
    properties = session.tools["search_knowledge"].input_schema["properties"]
    assert properties["query"]["maxLength"] == MAX_QUERY_CHARS
    assert properties["rrf_k"]["maximum"] == MAX_RRF_K
    assert properties["limit_chars"]["maximum"] == MAX_LIMIT_CHARS
    assert properties["chunk_ids"]["maxItems"] == read.MAX_CHUNK_IDS
    assert properties["tags"]["maxProperties"] == MAX_FILTER_PAIRS
    assert properties["recency_half_life_days"]["maximum"] == MAX_HALF_LIFE
    remember = session.tools["remember"].input_schema["properties"]
    assert remember["content"]["maxLength"] == memories.MAX_MEMORY_CHARS
    assert remember["tags"]["maxProperties"] == memories.MAX_TAGS


async def test_text_that_depends_on_settings_shows_this_servers_settings(
    corpus_db: Path | str,
) -> None:
    env = {"KBMCP_RRF_K": "20", "KBMCP_RECENCY_HALF_LIFE_DAYS": "7", "KBMCP_EMBEDDER": "hash"}
    configured = load_settings(env).with_db(corpus_db)
    with Workspace(configured, embedder=HashingEmbedder()) as ws:
        async with Client(build_server(ws)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            hit = payload(await client.call_tool("search_knowledge", {"query": "x", "mode": "rrf"}))
    properties = tools["search_knowledge"].input_schema["properties"]
    assert properties["rrf_k"]["description"].endswith("Default 20.")
    assert properties["recency_half_life_days"]["description"].endswith("Default 7.")
    assert "60" not in properties["rrf_k"]["description"]
    assert hit["rrf_k"] == 20  # and the server does what it says


# ------------------------------------------------------------------ 5. other servers' names

OTHER_NAMES = {
    ("search_knowledge", "project_id"): "knowledge_base_ids",
    ("search_knowledge", "collection_name"): "knowledge_base_ids",
    ("search_knowledge", "namespace"): "knowledge_base_ids",
    ("search_knowledge", "n_results"): "limit",
    ("search_knowledge", "top_k"): "limit",
    ("search_knowledge", "score_threshold"): "min_similarity",
    ("search_knowledge", "search_type"): "mode",
    ("search_knowledge", "filter"): "tags",
    ("search_knowledge", "where"): "metadata",
    ("search_knowledge", "file_path"): "document_paths",
    ("search_knowledge", "after"): "since",
    ("search_knowledge", "doc_id"): "document_id",
    ("list_documents", "project_id"): "knowledge_base_ids",
    ("list_documents", "folder"): "path_prefix",
    ("list_documents", "page_size"): "limit",
    ("list_documents", "start_cursor"): "cursor",
    ("remember", "text"): "content",
    ("remember", "namespace"): "memory_store_id",
    ("remember", "labels"): "tags",
}


@pytest.mark.parametrize(("tool", "name"), sorted(OTHER_NAMES))
def test_names_other_servers_use_get_the_name_to_use(
    session: Session, tool: str, name: str
) -> None:
    base = {"remember": {"content": "a fact"}}.get(tool, {})
    error = session.call(tool, {**base, name: "x"})["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["suggestions"] == {name: OTHER_NAMES[(tool, name)]}


# ------------------------------------------------------------------ 6. a lighter tools/list


def test_results_carry_every_field_of_their_shape(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    """tools/list leaves `required` out of output schemas (kbmcp/server/schema.py) because a
    result carries every field of its shape: checked here against the full model."""
    full = Draft202012Validator(models.SearchKnowledgeOutput.model_json_schema())
    calls = [
        {"query": "restore a backup", "include_content": True},
        {"document_id": corpus_ids["doc"][0]},
        {"document_id": corpus_ids["doc"][0], "outline": True},
        {"chunk_ids": corpus_ids["chk"][:2]},
        {"limit": 3},
    ]
    for arguments in calls:
        body = session.call("search_knowledge", arguments)
        full.validate(body)
        shape = body["request_mode"]
        properties = full.schema["$defs"][f"{shape.capitalize()}Output"]["properties"]
        assert set(body) == set(properties), shape


# ------------------------------------------------------------------ 3. explicit targets

# A semantic search with a floor no passage reaches: what survives is what the floor spares.
FLOORED = {"query": "restore a database backup", "mode": "semantic", "min_similarity": 0.999}
RUNBOOK_PATH = "ops/runbook.md"


def floored_paths(session: Session, **scope: Any) -> set[str]:
    body = session.call("search_knowledge", {**FLOORED, **scope})
    assert "error" not in body, body
    return {hit["path"] for hit in body["results"]}


def test_explicit_targets_are_never_emptied_by_a_floor(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    """The rule of docs/search.md and of min_similarity's description, scope kind by scope
    kind: a document named by id or by its exact path keeps its passages; a scope of many
    documents (knowledge base, path prefix, tags, metadata) keeps the floor."""
    docs = session.call("list_documents", {})["documents"]
    runbook = next(doc for doc in docs if doc["path"] == RUNBOOK_PATH)
    assert floored_paths(session) == set()  # nothing reaches the floor unscoped
    # Explicit targets: every passage of the document survives.
    assert floored_paths(session, document_ids=[runbook["document_id"]]) == {RUNBOOK_PATH}
    assert floored_paths(session, knowledge_ids=[runbook["document_id"]]) == {RUNBOOK_PATH}
    assert floored_paths(session, document_paths=[RUNBOOK_PATH]) == {RUNBOOK_PATH}
    # An exact path beside a prefix: only the named document is spared.
    assert floored_paths(session, document_paths=[RUNBOOK_PATH, "guides/"]) == {RUNBOOK_PATH}
    assert floored_paths(
        session, document_paths=[RUNBOOK_PATH], knowledge_base_ids=[runbook["knowledge_base_id"]]
    ) == {RUNBOOK_PATH}
    # Scopes of many documents are not targets: the floor applies.
    assert floored_paths(session, document_paths=["ops/"]) == set()
    assert floored_paths(session, document_paths=["ops/runbook"]) == set()  # a prefix of it
    assert floored_paths(session, knowledge_base_ids=[runbook["knowledge_base_id"]]) == set()
    assert floored_paths(session, tags={"tag": "runbook"}) == set()
    assert floored_paths(session, metadata={"owner": "infra"}) == set()
    # Without the floor those scopes do find the runbook: the floor is what empties them.
    unfloored = {k: v for k, v in FLOORED.items() if k != "min_similarity"}
    for scope in ({"document_paths": ["ops/"]}, {"tags": {"tag": "runbook"}}):
        body = session.call("search_knowledge", {**unfloored, **scope})
        assert RUNBOOK_PATH in {hit["path"] for hit in body["results"]}


def test_the_floor_rule_is_stated_where_an_agent_and_a_reader_look(session: Session) -> None:
    description = session.tools["search_knowledge"].input_schema["properties"]["min_similarity"][
        "description"
    ]
    assert "document_ids" in description and "exact document_paths" in description
    search_md = (Path(__file__).resolve().parent.parent / "docs" / "search.md").read_text()
    assert "exact path" in search_md and "never emptied by a floor" not in search_md


# ------------------------------------------------------------------ 4. a ready citation


def lines_of(citation: dict[str, Any]) -> str:
    start, end = citation["line_start"], citation["line_end"]
    return f"L{start}" if start == end else f"L{start}-L{end}"


def test_results_fetches_and_reads_carry_a_reference_to_paste(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    hits = session.call("search_knowledge", {"query": "restore a database backup"})["results"]
    runbook = next(hit for hit in hits if hit["path"] == RUNBOOK_PATH)
    citation = runbook["citation"]
    assert runbook["reference"] == (
        f"handbook:ops/runbook.md#{lines_of(citation)}@{citation['revision_id']}"
    )
    fetched = session.call("search_knowledge", {"chunk_ids": [runbook["chunk_id"]]})["chunks"][0]
    assert fetched["reference"] == runbook["reference"]
    window = session.call("search_knowledge", {"document_id": runbook["document_id"]})
    assert window["reference"] == (
        f"handbook:ops/runbook.md#L1-L{window['line_end']}@{window['revision_id']}"
    )
    assert window["line_end"] == window["content"].count("\n")  # the file's last line


def test_a_read_past_the_end_reports_a_sane_line_range(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    docs = session.call("list_documents", {})["documents"]
    runbook = next(doc for doc in docs if doc["path"] == RUNBOOK_PATH)
    whole = session.call("search_knowledge", {"document_id": runbook["document_id"]})
    last_line = whole["line_end"]
    for offset in (runbook["size_chars"], runbook["size_chars"] + 500):
        past = session.call(
            "search_knowledge", {"document_id": runbook["document_id"], "offset": offset}
        )
        assert past["content"] == ""
        assert (past["line_start"], past["line_end"]) == (last_line, last_line), offset
        assert past["reference"].endswith(f"#L{last_line}@{past['revision_id']}")


# ------------------------------------------------------------------ issue 39, 4: tags


def test_tags_have_one_shape_that_passes_back_as_a_filter(
    session: Session, corpus_ids: dict[str, list[str]]
) -> None:
    """Knowledge bases, documents, scan items and memories show tags as an object (a key with
    several values as the list of them), and that object, passed back as a tags filter, finds
    the document it came from."""
    docs = session.call("list_documents", {})["documents"]
    runbook = next(doc for doc in docs if doc["path"] == RUNBOOK_PATH)
    assert runbook["tags"] == {"tag": ["ops", "runbook"]}
    assert all(isinstance(doc["tags"], dict) for doc in docs)
    kbs = session.call("list_knowledge_bases", {})["knowledge_bases"]
    assert all(isinstance(kb["tags"], dict) for kb in kbs)
    scanned = session.call("search_knowledge", {"limit": 20})["results"]
    assert (
        next(item for item in scanned if item["path"] == RUNBOOK_PATH)["tags"] == (runbook["tags"])
    )
    found = session.call("search_knowledge", {"query": "restore", "tags": runbook["tags"]})
    assert {hit["path"] for hit in found["results"]} == {RUNBOOK_PATH}
    listed = session.call("list_documents", {"tags": runbook["tags"]})["documents"]
    assert [doc["path"] for doc in listed] == [RUNBOOK_PATH]
    # A list value asks for every value: a document with only one of them does not match.
    none = session.call("list_documents", {"tags": {"tag": ["runbook", "nonexistent"]}})
    assert none["documents"] == []


def test_the_cli_json_shows_tags_in_the_same_shape(corpus_file: Path, kbmcp: Any) -> None:
    import json

    listed = json.loads(kbmcp("--db", str(corpus_file), "ls", "handbook", "--json").out)
    documents = listed["documents"] if isinstance(listed, dict) else listed
    runbook = next(doc for doc in documents if doc["path"] == RUNBOOK_PATH)
    assert runbook["tags"] == {"tag": ["ops", "runbook"]}


# ------------------------------------------------------------------ 6. a lighter tools/list

# tools/list weighed 36,827 characters (8,367 cl100k tokens: bench/tools_list_size.py) before
# issue 34; the issue asked for at least 40% less. A budget, so it cannot grow back unnoticed.
TOOLS_LIST_BUDGET = int(36_827 * 0.6)


def test_tools_list_stays_within_its_budget(session: Session) -> None:
    import json

    tools = [
        tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        for tool in session.tools.values()
    ]
    size = len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))
    assert size <= TOOLS_LIST_BUDGET, size
    for tool in tools:  # no pydantic auto-titles anywhere
        assert '"title":"' not in json.dumps(tool["inputSchema"], separators=(",", ":"))
