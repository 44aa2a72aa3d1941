"""SSE resumability over streamable HTTP: each response stream opens with a priming event (an
id, empty data and the `retry` field), and a client that lost a stream can replay it from the
bounded event store by its last event id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_types import JSONRPCResponse

from kbmcp.errors import StoreError
from kbmcp.server.app import build_server
from kbmcp.server.event_store import RETRY_MS, ResumptionEvents
from kbmcp.server.http_app import http_app
from kbmcp.server.http_sessions import SessionLimits
from tests.mcp_support import HttpServer, hash_workspace, rpc_line, sse_events
from tests.patience import ceiling

pytestmark = pytest.mark.anyio
VERSION = "2025-11-25"  # the first protocol version with SSE polling (SEP-1699)
JSON_AND_SSE = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def test_a_response_stream_opens_with_a_priming_event(http_server: HttpServer) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    initialize = {"protocolVersion": VERSION, "capabilities": {},
                  "clientInfo": {"name": "sse", "version": "0"}}  # fmt: skip
    async with httpx2.AsyncClient(timeout=ceiling(30)) as http:
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


def message(n: int) -> Any:
    return JSONRPCResponse(jsonrpc="2.0", id=n, result={})


class Collected(list[Any]):
    async def __call__(self, event: Any) -> None:
        self.append(event.message.id)


async def test_the_event_store_replays_one_stream_and_stays_bounded() -> None:
    store = ResumptionEvents(max_events=5).session("s")
    first = await store.store_event("a", None)  # a priming event
    await store.store_event("b", message(1))
    await store.store_event("a", message(2))
    replayed = Collected()
    assert await store.replay_events_after(first, replayed) == "a"
    assert replayed == [2]
    for n in range(10):
        await store.store_event("c", message(n))
    assert await store.replay_events_after(first, replayed) is None  # evicted: too old


async def test_each_session_replays_only_its_own_events_and_forgets_them_when_it_ends() -> None:
    events = ResumptionEvents()
    mine, theirs = events.session("mine"), events.session("theirs")
    primed = await mine.store_event("2", None)
    assert await theirs.store_event("2", None) == primed  # ids count within each session
    await theirs.store_event("2", message(20))
    await mine.store_event("2", message(2))
    replayed = Collected()
    assert await mine.replay_events_after(primed, replayed) == "2"
    assert replayed == [2]
    events.drop("mine")
    assert len(events) == 2 and events.stored_bytes > 0  # theirs are kept
    assert await mine.replay_events_after(primed, replayed) is None
    events.drop("theirs")
    assert len(events) == 0 and events.stored_bytes == 0


async def test_a_replay_needs_everything_its_events_held_to_be_readable_now() -> None:
    readable: list[frozenset[int] | None] = [frozenset({1, 2})]

    async def readable_now() -> frozenset[int] | None:
        return readable[0]

    store = ResumptionEvents().session("s", readable_now)
    primed = await store.store_event("7", None)
    await store.store_event("7", message(7))  # stored while 1 and 2 were readable
    replayed = Collected()
    readable[0] = frozenset({1, 2, 3})  # more is fine
    assert await store.replay_events_after(primed, replayed) == "7"
    readable[0] = frozenset({1})  # 2 was unshared
    assert await store.replay_events_after(primed, replayed) is None
    readable[0] = None  # the token was revoked
    assert await store.replay_events_after(primed, replayed) is None
    assert replayed == [7]


async def test_an_event_whose_access_cannot_be_checked_is_kept_but_never_replayed() -> None:
    """The database is unreachable while a response is stored, or while a replay is asked
    for: the live stream carries on (store_event answers), and nothing replays unchecked."""
    reachable = [False]

    async def readable_now() -> frozenset[int] | None:
        if not reachable[0]:
            raise StoreError("cannot connect to PostgreSQL at postgresql://db/kb")
        return frozenset({1})

    store = ResumptionEvents().session("s", readable_now)
    primed = await store.store_event("3", None)
    assert await store.store_event("3", message(3))  # kept, marked unreplayable
    replayed = Collected()
    reachable[0] = True
    assert await store.replay_events_after(primed, replayed) is None
    primed = await store.store_event("4", None)
    await store.store_event("4", message(4))
    reachable[0] = False  # down again when the client comes back
    assert await store.replay_events_after(primed, replayed) is None
    reachable[0] = True
    assert await store.replay_events_after(primed, replayed) == "4"
    assert replayed == [4]


class UnreachableStore:
    """A token verifier whose database is down (what StoreTokenVerifier raises then)."""

    async def verify_token(self, token: str) -> None:
        raise StoreError("cannot connect to PostgreSQL at postgresql://db/kb")


async def test_a_token_check_without_a_database_is_503_not_401_or_500(corpus_file: Path) -> None:
    with hash_workspace(corpus_file) as ws:
        unreachable: Any = UnreachableStore()
        app = http_app(build_server(ws), verifier=unreachable, limits=SessionLimits())
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            answered = await http.post(
                "/mcp",
                headers={"Authorization": "Bearer kbmcp_0123456789abcdef_x", **JSON_AND_SSE},
                content=rpc_line(1, "ping"),
            )
    assert answered.status_code == 503, answered.text
    assert answered.headers["retry-after"] == "1"
    error = answered.json()["error"]
    assert error["data"] == {"code": "store_error"}
    assert "cannot connect to PostgreSQL" in error["message"]
