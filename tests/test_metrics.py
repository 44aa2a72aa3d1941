"""GET /metrics of a real `kbmcp serve --http` (kbmcp/server/metrics.py): scraped and parsed with
the Prometheus text parser, behind the same authentication as /mcp, on both backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.access_support import connect_with_token
from tests.cli_support import Run
from tests.mcp_support import HttpServer, connect, payload, write

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def _metrics_url(mcp_url: str) -> str:
    return mcp_url.removesuffix("/mcp") + "/metrics"


def _token(kbmcp: Callable[..., Run], db: Path | str, *scopes: str) -> str:
    args = [arg for scope in scopes for arg in ("--scope", scope)]
    run = kbmcp("--db", db, "token", "create", *args, "--json")
    assert run.code == 0, run.err
    return run.json()["secret"]  # type: ignore[index, no-any-return]


async def test_metrics_need_their_scope_and_parse(
    kbmcp: Callable[..., Run], backend_db: Path | str, backend: str, tmp_path: Path
) -> None:
    db = backend_db
    docs = write(tmp_path / "docs", {"a.md": "# A\n\nAlpha keys.\n", "b.md": "# B\n\nBeta.\n"})
    assert kbmcp("--db", db, "add", docs, "--kb", "handbook").code == 0
    assert kbmcp("--db", db, "remember", "The gate code is 4711").code == 0
    agent = _token(kbmcp, db, "knowledge:read", "memory:write")
    monitor = _token(kbmcp, db, "metrics:read")
    server = HttpServer(db)  # type: ignore[arg-type]
    try:
        async with connect_with_token(server.url, agent) as client:
            for _ in range(3):
                assert not (await client.call_tool("search_knowledge", {"query": "keys"})).is_error
            await client.call_tool("search_knowledge", {"chunk_ids": ["chk_0000000000000000"]})
            refused = await client.call_tool("search_knowledge", {"query": 5})
            assert refused.is_error
            assert not (await client.call_tool("list_knowledge_bases", {})).is_error
            async with httpx2.AsyncClient() as http:
                url = _metrics_url(server.url)
                assert (await http.get(url)).status_code == 401
                bad = await http.get(url, headers={"Authorization": "Bearer nope"})
                assert bad.status_code == 401
                agent_try = await http.get(url, headers={"Authorization": f"Bearer {agent}"})
                assert agent_try.status_code == 403
                scraped = await http.get(url, headers={"Authorization": f"Bearer {monitor}"})
                assert scraped.status_code == 200
                assert scraped.headers["content-type"].startswith("text/plain; version=")
                samples = _parse(scraped.text)
    finally:
        server.stop()

    calls = "kbmcp_tool_calls_total"
    assert _value(samples, calls, tool="search_knowledge", mode="query", outcome="ok") == 3
    assert _value(samples, calls, tool="search_knowledge", mode="fetch", outcome="ok") == 1
    assert _value(samples, calls, tool="list_knowledge_bases", mode="", outcome="ok") == 1
    # the refused call is counted with its error code, and timed with the others
    refused = {"tool": "search_knowledge", "mode": "query", "outcome": "invalid_request"}
    assert _value(samples, calls, **refused) == 1
    latency = "kbmcp_tool_call_duration_seconds_count"
    assert _value(samples, latency, tool="search_knowledge", mode="query") == 4
    assert _value(samples, "kbmcp_embedding_duration_seconds_count") >= 3  # a query each
    assert _value(samples, "kbmcp_http_refused_requests_total", status="401") == 2
    # (the SDK's client keeps no session open in the current protocol era: present, maybe 0)
    assert _value(samples, "kbmcp_http_sessions") >= 0
    assert _value(samples, "kbmcp_database_connections", backend=backend) >= 1
    documents = [v for (name, _labels), v in samples.items() if name == "kbmcp_documents"]
    memories = [v for (name, _labels), v in samples.items() if name == "kbmcp_memories"]
    assert (documents, memories) == ([2.0], [1.0])
    chunks = {dict(labels)["kind"]: v for (name, labels), v in samples.items()
              if name == "kbmcp_indexed_chunks"}  # fmt: skip
    assert chunks == {"documents": 2.0, "memories": 1.0}
    wal = [name for name, _ in samples if name == "kbmcp_sqlite_wal_bytes"]
    assert wal == (["kbmcp_sqlite_wal_bytes"] if backend == "sqlite" else [])


async def test_a_server_without_tokens_serves_metrics_on_loopback(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    async with connect("inprocess", db):  # creates the file
        pass
    server = HttpServer(db)
    try:
        async with connect("http", db, server.url) as client:
            payload(await client.call_tool("list_knowledge_bases", {}))
        async with httpx2.AsyncClient() as http:
            scraped = await http.get(_metrics_url(server.url))
            wrong_method = await http.post(_metrics_url(server.url))
            # the loopback check applies to /metrics as to /mcp
            rebound = await http.get(
                _metrics_url(server.url), headers={"Host": "evil.example:8765"}
            )
    finally:
        server.stop()
    assert scraped.status_code == 200
    samples = _parse(scraped.text)
    assert _value(samples, "kbmcp_tool_calls_total", tool="list_knowledge_bases", mode="",
                  outcome="ok") == 1  # fmt: skip
    assert wrong_method.status_code == 405
    assert rebound.status_code == 421 and scraped.text not in rebound.text
