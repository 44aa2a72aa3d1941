"""Isolation through MCP over HTTP: two tenants, several tokens, one real `kbmcp serve --http`.

Every entry point (search in each mode, scoped search, read, outline, chunk fetch, scan, both
listings) is exercised for each caller, and what it reached is compared with the caller's
readable set: own knowledge bases + shares in force, intersected with the token's allow-list.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from kbmcp.cli import main
from kbmcp.cli.serve import http_verifier
from kbmcp.server.auth import is_loopback
from kbmcp.server.scope_guard import TOOL_SCOPES
from kbmcp.service.tenants import share_knowledge_base, unshare_knowledge_base
from kbmcp.service.tokens import revoke_token
from kbmcp.store.sqlite.connection import open_connection
from tests.access_support import (
    MARKERS,
    admin_workspace,
    bearer_client,
    build_two_tenants,
    connect_with_token,
    expire_token,
    make_token,
    names_of,
)
from tests.mcp_support import HttpServer, payload
from tests.store_backends import database_on

pytestmark = pytest.mark.anyio

MODES = ["hybrid", "lexical", "semantic", "rrf"]
EVERYTHING = " ".join(MARKERS.values())

SELECT_IDS = """
SELECT kb.name, kb.public_id, d.public_id, c.public_id
FROM knowledge_base AS kb
JOIN document AS d ON d.knowledge_base_id = kb.id
JOIN chunk AS c ON c.revision_id = d.current_revision_id
ORDER BY kb.name, d.public_id, c.ordinal
"""


@dataclass(frozen=True)
class Corpus:
    db: Path | str
    url: str
    kb_ids: dict[str, str]  # name -> kb_ id
    documents: dict[str, list[str]]  # kb name -> document ids
    chunks: dict[str, list[str]]  # kb name -> chunk ids
    secrets: dict[str, str]  # token label -> secret
    token_ids: dict[str, str]  # token label -> tok_ id

    def names(self, kb_ids: set[str]) -> set[str]:
        return names_of(self.kb_ids, kb_ids)


@pytest.fixture(scope="module")
def corpus(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Corpus]:
    """Built in a file (ids read there), served from the test's backend (a copy: same ids)."""
    root = tmp_path_factory.mktemp("tenants")
    db = root / "kb.db"
    build_two_tenants(root, db)
    tokens = {
        "acme": make_token(db, "acme", ["knowledge:read"]),
        "beta": make_token(db, "beta", ["knowledge:read"]),
        "acme-ops-only": make_token(db, "acme", ["knowledge:read"], knowledge_bases=["acme-ops"]),
        "beta-memory": make_token(db, "beta", ["memory:read", "memory:write"]),
        "to-revoke": make_token(db, "beta", ["knowledge:read"]),
    }
    # Expired an hour ago by the machine's clock, while the server's KBMCP_NOW (T2, in January)
    # lies before its expiry: the pinned clock must not keep it alive.
    tokens["expired"] = make_token(db, "beta", ["knowledge:read"], expires_days=30)
    expire_token(db, tokens["expired"][0])
    conn = open_connection(db)
    kb_ids: dict[str, str] = {}
    documents: dict[str, list[str]] = {}
    chunks: dict[str, list[str]] = {}
    for kb_name, kb_id, doc_id, chunk_id in conn.execute(SELECT_IDS):
        kb_ids[kb_name] = kb_id
        documents.setdefault(kb_name, [])
        if doc_id not in documents[kb_name]:
            documents[kb_name].append(doc_id)
        chunks.setdefault(kb_name, []).append(chunk_id)
    conn.close()
    served = database_on(backend, db, request)
    server = HttpServer(served)
    try:
        yield Corpus(
            served,
            server.url,
            kb_ids,
            documents,
            chunks,
            {label: secret for label, (_, secret) in tokens.items()},
            {label: token_id for label, (token_id, _) in tokens.items()},
        )
    finally:
        server.stop()


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return payload(await client.call_tool(tool, args))


async def reached(client: Client, corpus: Corpus) -> dict[str, set[str]]:
    """Knowledge-base names whose content each entry point returned to this client."""
    seen: dict[str, set[str]] = {}

    def kbs(items: list[dict[str, Any]]) -> set[str]:
        return corpus.names({item["knowledge_base_id"] for item in items})

    for mode in MODES:
        body = await call(
            client, "search_knowledge", {"query": EVERYTHING, "mode": mode, "limit": 100}
        )
        seen[f"query:{mode}"] = kbs(body["results"])
    scoped = set()
    for name, kb_id in corpus.kb_ids.items():
        body = await call(
            client, "search_knowledge", {"query": EVERYTHING, "knowledge_base_ids": [kb_id]}
        )
        if "error" not in body and body["results"]:
            scoped.add(name)
        body = await call(
            client,
            "search_knowledge",
            {"query": EVERYTHING, "document_ids": corpus.documents[name], "mode": "lexical"},
        )
        if "error" not in body and body["results"]:
            scoped.add(name)
    seen["query:scoped"] = scoped
    seen["scan"] = kbs((await call(client, "search_knowledge", {"limit": 100}))["results"])
    read, outline = set(), set()
    for name, doc_ids in corpus.documents.items():
        for doc_id in doc_ids:
            if "error" not in await call(client, "search_knowledge", {"document_id": doc_id}):
                read.add(name)
            body = await call(client, "search_knowledge", {"document_id": doc_id, "outline": True})
            if "error" not in body:
                outline.add(name)
    seen["read"], seen["outline"] = read, outline
    every_chunk = [chunk for chunks in corpus.chunks.values() for chunk in chunks]
    fetched = await call(client, "search_knowledge", {"chunk_ids": every_chunk})
    seen["fetch"] = kbs(fetched["chunks"])
    assert set(fetched["missing"]) == {
        chunk
        for name, chunks in corpus.chunks.items()
        if name not in seen["fetch"]
        for chunk in chunks
    }
    seen["list_knowledge_bases"] = kbs(
        (await call(client, "list_knowledge_bases", {}))["knowledge_bases"]
    )
    seen["list_documents"] = kbs(
        (await call(client, "list_documents", {"limit": 200}))["documents"]
    )
    for kb_id in corpus.kb_ids.values():
        body = await call(client, "list_documents", {"knowledge_base_ids": [kb_id]})
        if "error" in body:
            assert body["error"]["code"] == "resource_unavailable"
        else:
            seen["list_documents"] |= kbs(body["documents"])
    return seen


def assert_reaches_exactly(seen: dict[str, set[str]], expected: set[str]) -> None:
    wrong = {entry: kbs for entry, kbs in seen.items() if kbs != expected}
    assert not wrong, f"expected every entry point to reach exactly {sorted(expected)}: {wrong}"


async def test_each_tenant_reaches_only_its_own_knowledge_bases(corpus: Corpus) -> None:
    async with connect_with_token(corpus.url, corpus.secrets["acme"]) as acme:
        assert_reaches_exactly(await reached(acme, corpus), {"acme-ops", "acme-notes"})
    async with connect_with_token(corpus.url, corpus.secrets["beta"]) as beta:
        assert_reaches_exactly(await reached(beta, corpus), {"beta-docs"})


async def test_a_share_is_visible_on_the_next_call_and_gone_after_unshare(corpus: Corpus) -> None:
    async with connect_with_token(corpus.url, corpus.secrets["beta"]) as beta:
        assert_reaches_exactly(await reached(beta, corpus), {"beta-docs"})
        with admin_workspace(corpus.db) as ws:
            share_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
        try:
            # Same session, next calls: the shared knowledge base (only that one) is readable.
            assert_reaches_exactly(await reached(beta, corpus), {"beta-docs", "acme-ops"})
            hits = await call(beta, "search_knowledge", {"query": "zanzibar", "mode": "lexical"})
            assert {r["path"] for r in hits["results"]} == {"failover.md"}
        finally:
            with admin_workspace(corpus.db) as ws:
                unshare_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
        assert_reaches_exactly(await reached(beta, corpus), {"beta-docs"})
    async with connect_with_token(corpus.url, corpus.secrets["acme"]) as acme:
        # Sharing never changed what the owner reads.
        kbs = await call(acme, "list_knowledge_bases", {})
        assert {kb["name"] for kb in kbs["knowledge_bases"]} == {"acme-ops", "acme-notes"}


async def test_a_token_limited_to_one_knowledge_base_sees_only_it(corpus: Corpus) -> None:
    async with connect_with_token(corpus.url, corpus.secrets["acme-ops-only"]) as client:
        assert_reaches_exactly(await reached(client, corpus), {"acme-ops"})
        body = await call(
            client,
            "search_knowledge",
            {"query": "quokka", "knowledge_base_ids": [corpus.kb_ids["acme-notes"]]},
        )
        assert body["error"]["code"] == "resource_unavailable"


async def test_unreadable_ids_are_errors_not_content(corpus: Corpus) -> None:
    async with connect_with_token(corpus.url, corpus.secrets["beta"]) as beta:
        doc = corpus.documents["acme-ops"][0]
        for args in (
            {"document_id": doc},
            {"document_id": doc, "outline": True},
            {"query": "zanzibar", "document_ids": [doc]},
            {"query": "zanzibar", "knowledge_base_ids": [corpus.kb_ids["acme-ops"]]},
        ):
            body = await call(beta, "search_knowledge", args)
            assert body["error"]["code"] == "resource_unavailable", args
            assert "zanzibar" not in str(body).lower()
        fetched = await call(beta, "search_knowledge", {"chunk_ids": corpus.chunks["acme-ops"]})
        assert fetched["chunks"] == [] and fetched["missing"] == corpus.chunks["acme-ops"]


async def test_scopes_hide_and_refuse_tools(corpus: Corpus) -> None:
    async with connect_with_token(corpus.url, corpus.secrets["beta-memory"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"search_knowledge", "list_memory_stores", "remember", "forget"}
        for tool, args in (("list_knowledge_bases", {}), ("list_documents", {})):
            body = await call(client, tool, args)
            assert body["error"]["code"] == "forbidden"
            assert body["error"]["details"] == {"tool": tool, "required_scope": "knowledge:read"}
        # Memory scopes search memories only: no document is reachable, and asking for
        # documents is refused by name.
        searched = await call(client, "search_knowledge", {"query": "narwhal"})
        assert searched["results"] == []
        body = await call(
            client, "search_knowledge", {"query": "narwhal", "include_documents": True}
        )
        assert body["error"]["code"] == "forbidden"
        assert body["error"]["details"]["required_scope"] == "knowledge:read"
    async with connect_with_token(corpus.url, corpus.secrets["beta"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"search_knowledge", "list_knowledge_bases", "list_documents"}
        body = await call(client, "remember", {"content": "narwhals are real"})
        assert body["error"]["code"] == "forbidden"
        assert body["error"]["details"] == {"tool": "remember", "required_scope": "memory:write"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 discover; 2025 initialize
@pytest.mark.parametrize("token", ["beta", "beta-memory"])
async def test_the_instructions_mention_only_the_tools_the_token_sees(
    corpus: Corpus, token: str, mode: str
) -> None:
    async with (
        bearer_client(corpus.secrets[token]) as http,
        Client(streamable_http_client(corpus.url, http_client=http), mode=mode) as client,
    ):
        visible = {tool.name for tool in (await client.list_tools()).tools}
        instructions = client.instructions or ""
    mentioned = {name for name in TOOL_SCOPES if re.search(rf"\b{name}\b", instructions)}
    assert mentioned == visible, instructions
    assert ("list_knowledge_bases" in visible) == ("Scope first" in instructions)


async def post_initialize(
    url: str, secret: str | None, *, authorization: str | None = None
) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    async with bearer_client(secret) as http:
        return await http.post(url, json=body, headers=headers)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-token",
        "Bearer kbmcp_0000000000000000_" + "A" * 43,
    ],
    ids=["missing", "no-secret", "basic", "malformed", "unknown"],
)
async def test_requests_without_a_valid_token_get_401(
    corpus: Corpus, authorization: str | None
) -> None:
    response = await post_initialize(corpus.url, None, authorization=authorization)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    if authorization is None or not authorization.startswith("Bearer"):
        # No token at all (none, or another scheme): the bare challenge, no error code
        # (RFC 6750 3.1: the client may not have known that authentication is needed).
        assert challenge == 'Bearer realm="kbmcp"'
        assert "error" not in response.json()
    else:  # a token was sent and refused
        assert challenge.startswith('Bearer error="invalid_token"')


async def test_a_wrong_secret_for_a_real_token_id_gets_401(corpus: Corpus) -> None:
    real = corpus.secrets["beta"]
    forged = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")
    assert (await post_initialize(corpus.url, forged)).status_code == 401
    assert (await post_initialize(corpus.url, real)).status_code == 200


async def test_an_expired_token_gets_401(corpus: Corpus) -> None:
    response = await post_initialize(corpus.url, corpus.secrets["expired"])
    assert response.status_code == 401
    assert "www-authenticate" in response.headers


async def test_a_revoked_token_gets_401_from_its_next_request(corpus: Corpus) -> None:
    secret = corpus.secrets["to-revoke"]
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with bearer_client(secret) as http:
        http.event_hooks["response"].append(record)
        async with Client(streamable_http_client(corpus.url, http_client=http)) as client:
            assert (await call(client, "list_knowledge_bases", {}))["knowledge_bases"]
            assert statuses[-1] == 200
            with admin_workspace(corpus.db) as ws:
                info = revoke_token(ws, ws.local_principal(), corpus.token_ids["to-revoke"])
            assert info.status == "revoked"
            # The open session's very next request is refused before reaching any tool.
            with pytest.raises(MCPError):
                await client.call_tool("list_knowledge_bases", {})
            assert statuses[-1] == 401
    response = await post_initialize(corpus.url, secret)
    assert response.status_code == 401
    assert "www-authenticate" in response.headers


async def test_health_needs_no_token_and_returns_no_data(corpus: Corpus) -> None:
    async with bearer_client(None) as http:
        response = await http.get(corpus.url.removesuffix("/mcp") + "/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


# ------------------------------------------------------------------ serve's host rules
# (in-process through the real entry point: each refusal happens before a server would start)


def serve_in_process(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str]:
    code = 0
    try:
        main(["--db", str(db), "serve", *args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def test_serving_a_public_address_without_tokens_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "kb.db"
    build_two_tenants(tmp_path, db)
    code, err = serve_in_process(capsys, db, "--http", "--host", "0.0.0.0", "--port", "0")
    assert code == 2
    assert "refusing to serve 0.0.0.0 without authentication" in err
    assert "kbmcp token create" in err


def test_loopback_without_tokens_serves_the_local_owner_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "kb.db"
    build_two_tenants(tmp_path, db)
    with admin_workspace(db) as ws:
        assert http_verifier(ws, "127.0.0.1") is None
        assert "WITHOUT authentication" in caplog.text
        with pytest.raises(click.UsageError):
            http_verifier(ws, "192.0.2.10")
    make_token(db, "acme", ["knowledge:read"])
    with admin_workspace(db) as ws:
        for host in ("127.0.0.1", "0.0.0.0", "::"):
            assert http_verifier(ws, host) is not None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.org", ""])
def test_non_loopback_addresses(host: str) -> None:
    assert not is_loopback(host)


def test_a_name_is_loopback_only_if_it_resolves_to_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, item 5: `--host localhost.` passed the check by its name but was bound
    through the resolver, which may answer with any address."""
    resolve = socket.getaddrinfo

    def resolver(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost.":
            return resolve("192.0.2.10", *args, **kwargs)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    assert is_loopback("localhost") and not is_loopback("localhost.")
    db = tmp_path / "kb.db"
    build_two_tenants(tmp_path, db)
    with admin_workspace(db) as ws, pytest.raises(click.UsageError, match=r"localhost\."):
        http_verifier(ws, "localhost.")


def test_a_name_that_does_not_resolve_is_not_loopback() -> None:
    assert not is_loopback("no-such-host.invalid")


def test_stdio_refuses_an_unusable_kbmcp_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "kb.db"
    build_two_tenants(tmp_path, db)
    monkeypatch.setenv("KBMCP_TOKEN", "kbmcp_0000000000000000_" + "A" * 43)
    code, err = serve_in_process(capsys, db)
    assert code == 2
    assert "KBMCP_TOKEN is not a usable token" in err
