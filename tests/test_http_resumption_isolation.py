"""SSE resumption belongs to the session that asked (issue 32, item 1).

A client that lost a response stream reconnects with `GET /mcp` and `Last-Event-ID` and receives
what it missed. What it may receive is what its own session was sent, and only while it may
still read it: the same token (the SDK binds a session to the token that opened it), the token
still usable, and every knowledge base the events came from still readable (a share in force).

Each test talks raw HTTP to a real `kbmcp serve --http` with tokens, on both backends, and
keeps a positive control next to each refusal: the same replay by the rightful session returns
the response, so a replay path that returned nothing at all could not pass.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from kbmcp.service.tenants import share_knowledge_base, unshare_knowledge_base
from kbmcp.service.tokens import revoke_token
from tests.access_support import MARKERS, admin_workspace, build_two_tenants, make_token
from tests.mcp_support import HttpServer, rpc_line, sse_events
from tests.patience import ceiling
from tests.store_backends import database_on

pytestmark = pytest.mark.anyio
VERSION = "2025-11-25"  # the first protocol version whose streams open with a priming event
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
SECRET_WORD = MARKERS["acme-ops"]  # only acme's runbook holds it
REPLAY_SECONDS = 20.0  # a ceiling: a replay ends at its priming event or when the server closes


@dataclass(frozen=True)
class Served:
    db: Path | str
    url: str
    secrets: dict[str, str]  # label -> secret
    token_ids: dict[str, str]  # label -> tok_ id


@pytest.fixture(scope="module")
def served(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("resumption")
    db = root / "kb.db"
    build_two_tenants(root, db)
    tokens = {
        "alice": make_token(db, "acme", ["knowledge:read", "memory:read", "memory:write"]),
        "alice-to-revoke": make_token(db, "acme", ["knowledge:read"]),
        # Sees no tool at all: it can only open sessions and ping.
        "bob-write-only": make_token(db, "beta", ["knowledge:write"]),
        "bob": make_token(db, "beta", ["knowledge:read"]),
    }
    served_db = database_on(backend, db, request)
    server = HttpServer(served_db)
    try:
        yield Served(
            served_db,
            server.url,
            {label: secret for label, (_, secret) in tokens.items()},
            {label: token_id for label, (token_id, _) in tokens.items()},
        )
    finally:
        server.stop()


class Session:
    """One MCP session over raw HTTP: every POST's SSE events are kept, by request id."""

    def __init__(self, http: httpx2.AsyncClient, url: str, secret: str) -> None:
        self.http, self.url = http, url
        self.auth = {"Authorization": f"Bearer {secret}"}
        self.headers: dict[str, str] = {}
        self.priming: dict[int, str] = {}  # request id -> the id of its stream's priming event

    async def open(self) -> Session:
        initialize = {"protocolVersion": VERSION, "capabilities": {},
                      "clientInfo": {"name": "resume", "version": "0"}}  # fmt: skip
        opened = await self.http.post(
            self.url, headers={**ACCEPT, **self.auth}, content=rpc_line(0, "initialize", initialize)
        )
        assert opened.status_code == 200, opened.text
        self.headers = {
            **self.auth,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": VERSION,
        }
        sent = await self.http.post(
            self.url,
            headers={**ACCEPT, **self.headers},
            content=rpc_line(None, "notifications/initialized"),
        )
        assert sent.status_code == 202, sent.text
        return self

    async def request(self, message_id: int, method: str, params: dict[str, Any] | None) -> Any:
        reply = await self.http.post(
            self.url,
            headers={**ACCEPT, **self.headers},
            content=rpc_line(message_id, method, params),
        )
        assert reply.status_code == 200, reply.text
        priming, *rest = sse_events(reply.text)
        assert priming["data"] == "" and priming["id"], reply.text
        self.priming[message_id] = priming["id"]
        return json.loads(rest[-1]["data"])

    async def replay(self, last_event_id: str, *, as_session: Session | None = None) -> list[Any]:
        """The messages a `GET /mcp` with `Last-Event-ID` receives, sent as `as_session` (default:
        this one): every data event until the resumed stream's priming event or the end."""
        headers = {
            **(as_session or self).headers,
            "Accept": "text/event-stream",
            "Last-Event-ID": last_event_id,
        }
        messages: list[Any] = []
        with anyio.fail_after(ceiling(REPLAY_SECONDS)):
            async with self.http.stream("GET", self.url, headers=headers) as response:
                if response.status_code != 200:
                    return [("status", response.status_code)]
                block: list[str] = []
                async for line in response.aiter_lines():
                    if line:
                        block.append(line)
                        continue
                    event = sse_events("\n".join(block))
                    block = []
                    if not event:
                        continue
                    data = event[0].get("data", "")
                    if data == "":  # the resumed stream's priming event: the replay is over
                        break
                    messages.append(json.loads(data))
        return messages


@pytest.fixture
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=ceiling(60)) as client:
        yield client


def search(query: str) -> dict[str, Any]:
    return {"name": "search_knowledge", "arguments": {"query": query, "mode": "lexical"}}


def mentions(messages: list[Any], word: str) -> bool:
    return word in json.dumps(messages).lower()


async def test_a_session_replays_its_own_events_and_never_another_tenants(
    served: Served, http: httpx2.AsyncClient
) -> None:
    bob = await Session(http, served.url, served.secrets["bob-write-only"]).open()
    for k in range(12):
        assert (await bob.request(k + 1, "ping", None))["result"] == {}
    alice = await Session(http, served.url, served.secrets["alice"]).open()
    for k in range(1, 6):
        found = await alice.request(k, "tools/call", search(SECRET_WORD))
        assert mentions([found], SECRET_WORD)
    remembered = await alice.request(
        6, "tools/call",
        {"name": "remember", "arguments": {"content": "Payroll runs on the 25th: orca"}},
    )  # fmt: skip
    assert "error" not in json.dumps(remembered["result"].get("structuredContent", {}))

    for k in range(1, 7):
        replayed = await bob.replay(bob.priming[k])
        # Bob's own answer to request k, and nothing of alice's request k.
        assert replayed == [{"jsonrpc": "2.0", "id": k, "result": {}}], replayed
        assert not mentions(replayed, SECRET_WORD) and not mentions(replayed, "orca")
    # Alice's own events replay to her (the positive control).
    assert mentions(await alice.replay(alice.priming[1]), SECRET_WORD)


async def test_an_event_id_of_another_session_replays_nothing_even_for_the_same_token(
    served: Served, http: httpx2.AsyncClient
) -> None:
    first = await Session(http, served.url, served.secrets["alice"]).open()
    second = await Session(http, served.url, served.secrets["alice"]).open()
    for k in range(1, 6):
        await first.request(k, "tools/call", search(SECRET_WORD))
    await second.request(1, "ping", None)
    assert mentions(await first.replay(first.priming[5]), SECRET_WORD)
    # Event ids count within a session: the second session has no event 5's id of the first...
    assert first.priming[5] not in second.priming.values()
    assert await first.replay(first.priming[5], as_session=second) == []
    # ...and where the ids coincide (each session's first request), each replays its own.
    assert first.priming[1] == second.priming[1]
    assert await first.replay(first.priming[1], as_session=second) == [
        {"jsonrpc": "2.0", "id": 1, "result": {}}
    ]


async def test_a_revoked_token_replays_nothing(served: Served, http: httpx2.AsyncClient) -> None:
    session = await Session(http, served.url, served.secrets["alice-to-revoke"]).open()
    await session.request(1, "tools/call", search(SECRET_WORD))
    assert mentions(await session.replay(session.priming[1]), SECRET_WORD)
    with admin_workspace(served.db) as ws:
        revoke_token(ws, ws.local_principal(), served.token_ids["alice-to-revoke"])
    assert await session.replay(session.priming[1]) == [("status", 401)]


async def test_an_unshared_knowledge_base_replays_nothing(
    served: Served, http: httpx2.AsyncClient
) -> None:
    with admin_workspace(served.db) as ws:
        share_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
    try:
        session = await Session(http, served.url, served.secrets["bob"]).open()
        await session.request(1, "tools/call", search(SECRET_WORD))
        assert mentions(await session.replay(session.priming[1]), SECRET_WORD)
    finally:
        with admin_workspace(served.db) as ws:
            unshare_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
    assert await session.replay(session.priming[1]) == []
    # Events stored once the share was gone replay as before.
    await session.request(2, "ping", None)
    assert await session.replay(session.priming[2]) == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
