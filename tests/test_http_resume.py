"""SSE resumability over streamable HTTP: each response stream opens with a priming event (an
id, empty data and the `retry` field), and a client that lost a stream can replay it from the
bounded event store by its last event id."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from mcp_types import JSONRPCResponse

from kbmcp.server.event_store import RETRY_MS, BoundedEventStore
from tests.mcp_support import HttpServer, rpc_line

pytestmark = pytest.mark.anyio
VERSION = "2025-11-25"  # the first protocol version with SSE polling (SEP-1699)


def sse_events(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.replace("\r\n", "\n").strip().split("\n\n"):
        event: dict[str, str] = {}
        for line in block.splitlines():
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")
        events.append(event)
    return events


async def test_a_response_stream_opens_with_a_priming_event(http_server: HttpServer) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    initialize = {"protocolVersion": VERSION, "capabilities": {},
                  "clientInfo": {"name": "sse", "version": "0"}}  # fmt: skip
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(
            http_server.url, headers=headers, content=rpc_line(1, "initialize", initialize)
        )
        session = {"mcp-session-id": opened.headers["mcp-session-id"],
                   "mcp-protocol-version": VERSION}  # fmt: skip
        await http.post(http_server.url, headers={**headers, **session},
                        content=rpc_line(None, "notifications/initialized"))  # fmt: skip
        listed = await http.post(
            http_server.url, headers={**headers, **session}, content=rpc_line(2, "tools/list")
        )
    priming, *rest = sse_events(listed.text)
    assert priming["id"] and priming["data"] == "" and priming["retry"] == str(RETRY_MS)
    assert json.loads(rest[-1]["data"])["id"] == 2


async def test_the_event_store_replays_one_stream_and_stays_bounded() -> None:
    store = BoundedEventStore(max_events=5)

    def message(n: int) -> Any:
        return JSONRPCResponse(jsonrpc="2.0", id=n, result={})

    first = await store.store_event("a", None)  # a priming event
    await store.store_event("b", message(1))
    await store.store_event("a", message(2))
    replayed: list[Any] = []

    async def collect(event: Any) -> None:
        replayed.append(event.message.id)

    assert await store.replay_events_after(first, collect) == "a"
    assert replayed == [2]
    for n in range(10):
        await store.store_event("c", message(n))
    assert await store.replay_events_after(first, collect) is None  # evicted: too old
