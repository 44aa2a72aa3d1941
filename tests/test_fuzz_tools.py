"""Fuzzing the MCP tools through a real client over stdio and HTTP (issue 11, item 4).

Hypothesis sends random arguments (random JSON under real and made-up parameter names, mixed
with real ids and edge values) to every tool. Every call must end in a success or a tool error
with a stable code: no internal_error, no traceback text, no JSON-RPC error without a valid code.
Read tools must leave the file unchanged: the file's bytes and a dump of every table are
compared before and after. Bounded: a fixed number of examples per transport, derandomized so CI
runs the same calls every time (KBMCP_FUZZ_EXAMPLES raises the count for a longer local run).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from tests.mcp_support import HttpServer, build_corpus, connect, payload
from tests.store_backends import database_on

STABLE_CODES = {
    "invalid_request",
    "query_required",
    "resource_unavailable",
    "forbidden",
    "model_mismatch",
    "model_unavailable",
    "read_only",
}
JSONRPC_CODES = {-32700, -32600, -32601, -32602}
EXAMPLES = int(os.environ.get("KBMCP_FUZZ_EXAMPLES", "50"))


class Fuzzed:
    """A client held open in a background event loop, callable from Hypothesis's sync tests."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client
        self.tools = {
            tool.name: sorted(tool.input_schema.get("properties", {}))
            for tool in portal.call(client.list_tools).tools
        }

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments)


# The audit trail is the one thing read tools write: refused calls and search counts
# (kbmcp/service/audit.py). The file's bytes change with it, so rows are compared instead.
AUDITED = {"audit_event"}


def file_fingerprint(db: Path) -> str:
    """sha256 of every row of every ordinary table but the audit trail."""
    conn = apsw.Connection(f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | 0x40)
    dump = hashlib.sha256()
    tables = conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        " ORDER BY name"
    ).fetchall()
    for (table,) in tables:
        if table in AUDITED:
            continue
        for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
            dump.update(repr((table, row)).encode())
    conn.close()
    return dump.hexdigest()


def database_fingerprint(url: str) -> str:
    """sha256 of every row of every table of a PostgreSQL database but the audit trail."""
    import psycopg

    dump = hashlib.sha256()
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
        ).fetchall()
        for (table,) in tables:
            if table in AUDITED:
                continue
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
                dump.update(repr((table, row)).encode())
    return dump.hexdigest()


def fingerprint(db: Path | str) -> object:
    return file_fingerprint(db) if isinstance(db, Path) else database_fingerprint(db)


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    db = root / "kb.db"
    build_corpus(root, db)
    return db


@pytest.fixture(scope="module")
def fuzz_db(backend: str, fuzz_file: Path, request: pytest.FixtureRequest) -> Iterator[Path | str]:
    """The corpus on the test's backend; whatever the fuzzer sends, not a row of it changes
    (but the audit trail's: the refusals and searches it records)."""
    db = database_on(backend, fuzz_file, request)
    before = fingerprint(db)
    yield db
    assert fingerprint(db) == before, "read tools changed the database"


@pytest.fixture(scope="module", params=["stdio", "http"])
def fuzzed(request: pytest.FixtureRequest, fuzz_db: Path | str) -> Iterator[Fuzzed]:
    server = HttpServer(fuzz_db) if request.param == "http" else None
    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            url = server.url if server else None
            with portal.wrap_async_context_manager(connect(request.param, fuzz_db, url)) as c:
                yield Fuzzed(portal, c)
    finally:
        if server is not None:
            server.stop()


def real_ids(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    ids = [
        row[0]
        for query in (
            "SELECT public_id FROM knowledge_base",
            "SELECT public_id FROM document",
            "SELECT public_id FROM revision LIMIT 3",
            "SELECT public_id FROM chunk LIMIT 3",
        )
        for row in conn.execute(query)
    ]
    conn.close()
    return ids


TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
EDGE_VALUES = st.sampled_from(
    [0, -1, 1, 2**31, 2**63, -(2**63), 10**30, 1e308, -0.0, 0.5, 100, 101, 10_000, 10_001,
     "", " ", "*", '"', "AND", "NEAR(", "%", "kb_", "doc_", "chk_0000000000000000",
     "doc_0123456789abcdef", "2026-01-02", "not a date", "../../etc/passwd", "\x00", "é" * 500,
     "hybrid", "lexical", "semantic", "rrf", "keyword", [], {}, [""], [None], {"": ""}]
)  # fmt: skip
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
    | EDGE_VALUES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)


@st.composite
def tool_call(draw: st.DrawFn, tools: dict[str, list[str]], ids: list[str]) -> tuple[str, dict]:
    name = draw(st.sampled_from(sorted(tools)))
    keys = st.sampled_from([*tools[name], "querry", "owner", "tenant_id"])
    value = JSON | st.sampled_from(ids) | st.lists(st.sampled_from(ids), max_size=4)
    return name, draw(st.dictionaries(keys, value, max_size=5))


def check(result: CallToolResult) -> None:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    assert not any("Traceback" in text for text in texts), texts
    body = payload(result)
    if result.is_error:
        error = body["error"]
        assert error["code"] in STABLE_CODES, error
        assert isinstance(error["message"], str) and error["message"]


def call_and_check(fuzzed: Fuzzed, name: str, arguments: dict[str, Any]) -> None:
    try:
        result = fuzzed.call(name, arguments)
    except MCPError as error:  # a protocol-level refusal must still carry a valid code
        assert error.error.code in JSONRPC_CODES, error.error
        return
    check(result)


def test_random_tool_arguments_get_results_or_stable_errors(
    fuzzed: Fuzzed, fuzz_file: Path
) -> None:
    ids = real_ids(fuzz_file)  # the same in the PostgreSQL copy

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(call=tool_call(fuzzed.tools, ids))
    def run(call: tuple[str, dict[str, Any]]) -> None:
        call_and_check(fuzzed, *call)

    run()


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "x" * 1_000_000},  # a 1 MB query: a clean answer, never a traceback
        {"query": "heron " * 20_000, "limit": 100},
        {"document_ids": [f"doc_{n:016x}" for n in range(10_000)], "query": "q"},
        {"chunk_ids": ["chk_0000000000000000"] * 5_000},
        {"limit": 10**100},
    ],
    ids=["1MB-query", "long-query", "10k-document-ids", "5k-chunk-ids", "huge-limit"],
)
def test_oversized_arguments(fuzzed: Fuzzed, arguments: dict[str, Any]) -> None:
    call_and_check(fuzzed, "search_knowledge", arguments)
