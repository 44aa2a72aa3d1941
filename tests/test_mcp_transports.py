"""The real server over its three transports: in-process, `kbmcp serve` over stdio, and
`kbmcp serve --http` on 127.0.0.1. The same calls must give the same JSON everywhere (the
in-process outputs are pinned by snapshots in tests/test_mcp_tools.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client

from kbmcp.cli import cli
from tests import processes
from tests.id_support import test_id
from tests.mcp_support import (
    REPO_ROOT,
    HttpServer,
    connect,
    payload,
    rpc_line,
    subprocess_env,
)
from tests.patience import ceiling

pytestmark = pytest.mark.anyio

HANDBOOK = test_id("knowledge_base", test_id("tenant", "local"), "handbook")
RUNBOOK_DOC = test_id("document", HANDBOOK, "ops/runbook.md")
RUNBOOK_REV = test_id("revision", RUNBOOK_DOC, 1)

# One call of every non-query tool and mode, plus errors (query mode: tests/test_mcp_query.py).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_knowledge_bases", {}),
    ("list_documents", {"limit": 2}),
    ("list_documents", {"path_prefix": "ops/", "tags": {"tag": "runbook"}}),
    ("search_knowledge", {"document_id": RUNBOOK_DOC, "offset": 100, "limit_chars": 200}),
    ("search_knowledge", {"document_id": RUNBOOK_DOC, "outline": True}),
    ("search_knowledge", {"chunk_ids": [test_id("chunk", RUNBOOK_REV, 0), "chk_0000000000000000"]}),
    ("search_knowledge", {"since": "2026-01-02", "limit": 10}),
    ("search_knowledge", {"query": "backups", "document_id": RUNBOOK_DOC}),
    ("search_knowledge", {"revision_id": RUNBOOK_REV}),
    ("search_knowledge", {"chunk_ids": []}),
    ("search_knowledge", {"document_id": "doc_0123456789abcdef"}),
    ("search_knowledge", {"querry": "typo"}),
]


async def run_calls(client: Client) -> list[Any]:
    outputs: list[Any] = [
        [t.model_dump(mode="json", by_alias=True) for t in (await client.list_tools()).tools]
    ]
    for tool, arguments in CALLS:
        result = await client.call_tool(tool, arguments)
        outputs.append({"is_error": result.is_error, "payload": payload(result)})
    return outputs


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_same_results_over_every_transport(
    transport: str, corpus_db: Path | str, http_server: HttpServer
) -> None:
    async with connect("inprocess", corpus_db) as client:
        expected = await run_calls(client)
    async with connect(transport, corpus_db, http_server.url) as client:
        assert client.server_info is not None and client.server_info.name == "kbmcp"
        assert "Scope first" in (client.instructions or "")
        actual = await run_calls(client)
    assert [o["is_error"] for o in actual[1:]] == [False] * 7 + [True] * 5
    assert actual == expected


def test_stdio_stdout_carries_protocol_messages_only(tmp_path: Path) -> None:
    """A desktop client's exchange, byte for byte: every stdout line is a JSON-RPC response to
    our requests, nothing else, even though the default model loads at start-up."""
    db = tmp_path / "fresh.db"
    requests = "".join([
        rpc_line(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "raw-test", "version": "0"}}),
        rpc_line(None, "notifications/initialized"),
        rpc_line(2, "tools/list"),
        rpc_line(3, "tools/call", {"name": "list_knowledge_bases", "arguments": {}}),
    ])  # fmt: skip
    process = processes.popen(
        [
            sys.executable,
            "-m",
            "kbmcp",
            "--db",
            str(db),
            "serve",
            "--create",
            "--log-level",
            "debug",
        ],
        env=subprocess_env(db, KBMCP_EMBEDDER="minilm"),
        cwd=str(REPO_ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # A hung server fails the test, not the run.
    watchdog = threading.Timer(ceiling(60), processes.kill_group, [process])
    watchdog.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(requests)
        process.stdin.flush()
        lines = [process.stdout.readline() for _ in range(3)]
        process.stdin.close()  # EOF: the server exits
        lines += process.stdout.readlines()
        stderr = process.stderr.read() if process.stderr else ""
        assert process.wait() == 0, stderr
    finally:
        watchdog.cancel()
        processes.stop(process)
    messages = [json.loads(line) for line in lines]
    assert [m.get("id") for m in messages] == [1, 2, 3], stderr
    assert all(m["jsonrpc"] == "2.0" and "result" in m for m in messages)
    assert messages[0]["result"]["serverInfo"]["name"] == "kbmcp"
    assert messages[2]["result"]["structuredContent"] == {"knowledge_bases": []}
    assert "kbmcp DEBUG" in stderr  # the logs went to stderr instead


async def test_http_rejects_foreign_host_header(http_server: HttpServer) -> None:
    """DNS-rebinding protection: a page on another origin cannot drive the local server."""
    async with httpx2.AsyncClient(timeout=ceiling(30)) as http:
        response = await http.post(
            http_server.url,
            headers={"Host": "evil.example:80", "Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream"},
            content=rpc_line(1, "tools/list"),
        )  # fmt: skip
    assert response.status_code in (403, 421)


def test_host_and_port_need_http() -> None:
    result = CliRunner().invoke(cli, ["serve", "--port", "9000"])
    assert result.exit_code != 0 and "--http" in result.output
