"""HTTP sessions a client abandons (issue 20, item 6): they expire sooner (configurable), and
the number kept is capped with the longest-idle one ended to make room, so memory stays bounded
and a new client is never refused because of abandoned ones.

The servers serve the corpus file only: sessions are the HTTP transport's (opened with
`initialize`, probed with `ping`), no request reaches the store, so the PostgreSQL copy of the
corpus would only run the same transport twice."""

from __future__ import annotations

import json
import shutil
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_types import JSONRPCResponse

from kbmcp.errors import InvalidRequest
from kbmcp.server.event_store import ResumptionEvents
from kbmcp.server.http_sessions import session_limits_from_env
from tests.access_support import make_token
from tests.mcp_support import rpc_line
from tests.patience import ceiling, patience
from tests.server_process import HttpProcess

VERSION = "2025-06-18"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = rpc_line(
    1, "initialize",
    {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
)  # fmt: skip


def open_session(http: httpx2.Client, url: str, auth: dict[str, str] | None = None) -> str:
    opened = http.post(url, headers={**HEADERS, **(auth or {})}, content=INITIALIZE)
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def ping(http: httpx2.Client, url: str, session: str, auth: dict[str, str] | None = None) -> int:
    headers = {
        **HEADERS,
        **(auth or {}),
        "mcp-session-id": session,
        "mcp-protocol-version": VERSION,
    }
    return http.post(url, headers=headers, content=rpc_line(2, "ping")).status_code


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_abandoned_sessions_make_room_for_new_clients(corpus_file: Path) -> None:
    server = HttpProcess(corpus_file, env={"KBMCP_MAX_SESSIONS": "20"})
    try:
        with httpx2.Client(timeout=ceiling(30)) as http:
            sessions = [open_session(http, server.url) for _ in range(60)]  # none refused
            assert [ping(http, server.url, s) for s in sessions[:40]] == [404] * 40
            assert [ping(http, server.url, s) for s in sessions[40:]] == [200] * 20
    finally:
        server.stop()


def test_requests_without_a_valid_token_never_end_a_session(
    corpus_file: Path, tmp_path: Path
) -> None:
    """Issue 32, item 4: eviction ran before authentication, so each token-less `initialize`
    (answered 401) ended a legitimate idle session at the cap. Only a request that passed
    authentication may cost another session its place."""
    db = tmp_path / "kb.db"
    shutil.copyfile(corpus_file, db)
    _, secret = make_token(db, "local", ["knowledge:read"])
    server = HttpProcess(db, env={"KBMCP_MAX_SESSIONS": "3"})
    bearer = {"Authorization": f"Bearer {secret}"}
    try:
        with httpx2.Client(timeout=ceiling(30)) as http:
            sessions = [open_session(http, server.url, bearer) for _ in range(3)]
            for auth in ({}, {"Authorization": "Bearer kbmcp_not_a_token"}):
                for _ in range(5):
                    refused = http.post(server.url, headers={**HEADERS, **auth}, content=INITIALIZE)
                    assert refused.status_code == 401
            assert [ping(http, server.url, s, bearer) for s in sessions] == [200] * 3
            # An authenticated newcomer still makes room (the longest-idle session ends).
            newcomer = open_session(http, server.url, bearer)
            assert ping(http, server.url, sessions[0], bearer) == 404
            assert ping(http, server.url, newcomer, bearer) == 200
    finally:
        server.stop()


def test_memory_stays_flat_however_many_sessions_are_abandoned(corpus_file: Path) -> None:
    """~40 KiB a session: 1,500 abandoned sessions took ~60 MiB and kept it. 400 of them
    uncapped grow the server by ~16 MiB, past the bound; capped at 50, by ~4 MiB (both
    measured: KBMCP_MAX_SESSIONS=100000 fails this test)."""
    server = HttpProcess(corpus_file, env={"KBMCP_MAX_SESSIONS": "50"})
    try:
        with httpx2.Client(timeout=ceiling(30)) as http:
            for _ in range(100):
                open_session(http, server.url)
            warm = rss_mib(server.pid)
            for _ in range(400):
                open_session(http, server.url)
            grown = rss_mib(server.pid) - warm
    finally:
        server.stop()
    assert grown < 10, f"RSS grew {grown:.1f} MiB over 400 abandoned sessions"


def test_idle_sessions_expire_after_the_configured_time(corpus_file: Path) -> None:
    # 1 s on an idle machine; longer under load, where the first ping may come later (each
    # ping that finds the session restarts its idle time: so a sleep, not a poll, below).
    factor = patience()
    server = HttpProcess(corpus_file, env={"KBMCP_SESSION_IDLE_SECONDS": f"{factor:g}"})
    try:
        with httpx2.Client(timeout=ceiling(30)) as http:
            session = open_session(http, server.url)
            assert ping(http, server.url, session) == 200
            time.sleep(2.5 * factor)
            assert ping(http, server.url, session) == 404  # the client opens a new one
            assert ping(http, server.url, open_session(http, server.url)) == 200
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("name", "value"),
    [("KBMCP_SESSION_IDLE_SECONDS", "0"), ("KBMCP_SESSION_IDLE_SECONDS", "soon"),
     ("KBMCP_SESSION_IDLE_SECONDS", "inf"), ("KBMCP_MAX_SESSIONS", "0"),
     ("KBMCP_MAX_SESSIONS", "1.5")],
)  # fmt: skip
def test_bad_session_settings_are_named(name: str, value: str) -> None:
    with pytest.raises(InvalidRequest, match=name):
        session_limits_from_env({name: value})


def test_session_settings_default_to_five_minutes_and_a_thousand() -> None:
    limits = session_limits_from_env({})
    assert (limits.idle_seconds, limits.max_sessions) == (300.0, 1000)


@pytest.mark.anyio
async def test_the_event_store_is_bounded_in_bytes() -> None:
    events = ResumptionEvents(max_events=1000, max_bytes=100_000)
    store = events.session("a")

    def big(n: int) -> Any:
        return JSONRPCResponse(jsonrpc="2.0", id=n, result={"text": "x" * 10_000})

    ids = [await store.store_event("s", big(n)) for n in range(50)]
    assert events.stored_bytes <= 100_000
    replayed: list[Any] = []

    async def collect(event: Any) -> None:
        replayed.append(event.message.id)

    assert await store.replay_events_after(ids[0], collect) is None  # dropped long ago
    assert await store.replay_events_after(ids[-3], collect) == "s"
    assert replayed == [48, 49]


def search_like_response(n: int) -> Any:
    """A response shaped like search_knowledge's: many small strings and numbers, nested."""
    results = [
        {
            "chunk_id": f"c{n}-{i}",
            "document_id": f"d{n}-{i}",
            "title": f"Note {n} {i}",
            "heading_path": ["Note", f"Section {i}"],
            "score": 0.5 + i / 100,
            "excerpt": "heron latency shard backup token " * 8,
            "tags": ["soak", "notes"],
        }
        for i in range(5)
    ]
    data = {"results": results, "strategy": "hybrid", "took_ms": 3}
    text = json.dumps(data)
    return JSONRPCResponse(
        jsonrpc="2.0",
        id=n,
        result={"content": [{"type": "text", "text": text}], "structuredContent": data},
    )


@pytest.mark.anyio
async def test_the_event_store_holds_no_more_memory_than_its_byte_bound() -> None:
    """The bound is on what the kept events cost the server, not only on their JSON: kept as
    parsed messages, 8 MiB of search results' JSON held ~3x that in Python objects."""
    events = ResumptionEvents(max_events=100_000, max_bytes=500_000)
    store = events.session("a")
    await store.store_event("s", search_like_response(0))  # first-use allocations
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(1, 400):
            await store.store_event("s", search_like_response(n))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert events.stored_bytes <= 500_000
    assert held < 1.25 * 500_000, f"{held} bytes held for {events.stored_bytes} bytes of JSON"
