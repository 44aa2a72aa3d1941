"""Several servers, one database (issue 18 item 3): two real `kbmcp serve --http` processes on
one database, driven by the MCP SDK's client over HTTP with bearer tokens.

A write made anywhere (the CLI, another server) is seen by the next request on either server,
and a revoked token is refused by both on their next request: neither keeps a process-local
copy of search results, readable sets or tokens. Each check first asks both servers the
question whose answer the write changes, so a cache would be warm and would answer stale.

The module runs on both backends: on PostgreSQL this is the scale-out topology (stateless
replicas on one database); on SQLite the long-lived servers' in-memory search accelerators must
follow another process's writes to the file.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from kbmcp.store.copy import copy_store
from tests.access_support import bearer_client, build_two_tenants, make_token
from tests.cli_support import Run
from tests.mcp_support import HttpServer, payload, write

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Servers:
    db: Path | str
    urls: tuple[str, str]
    secrets: dict[str, str]  # token label -> secret
    token_ids: dict[str, str]  # token label -> tok_ id


@pytest.fixture(scope="module")
def servers(
    module_backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Servers]:
    """Two HTTP servers on one database holding tenants acme and beta
    (tests/access_support.py) and their tokens."""
    root = tmp_path_factory.mktemp("multi")
    source = root / "kb.db"
    build_two_tenants(root / "files", source)
    db: Path | str = source
    if module_backend == "postgres":
        db = str(request.getfixturevalue("postgres_url"))
        copy_store(str(source), db, force=True)
    with two_servers(db) as running:
        yield running


@contextlib.contextmanager
def two_servers(db: Path | str) -> Iterator[Servers]:
    """Two HTTP servers on `db` (holding tenants acme and beta) and the tests' tokens."""
    tokens = {
        "acme": make_token(db, "acme", ["knowledge:read"]),
        "acme-memory": make_token(db, "acme", ["memory:read", "memory:write"]),
        "to-revoke": make_token(db, "beta", ["knowledge:read"]),
    }
    first = HttpServer(db)
    try:
        second = HttpServer(db)
    except BaseException:
        first.stop()
        raise
    try:
        yield Servers(
            db,
            (first.url, second.url),
            {label: secret for label, (_, secret) in tokens.items()},
            {label: token_id for label, (token_id, _) in tokens.items()},
        )
    finally:
        first.stop()
        second.stop()


@contextlib.asynccontextmanager
async def both(servers: Servers, token: str) -> AsyncIterator[tuple[Client, Client]]:
    """A client on each server, authenticated with the token labelled `token`; one session
    each, kept open across the write (as an agent keeps its session)."""
    secret = servers.secrets[token]
    async with (
        bearer_client(secret) as http_a,
        bearer_client(secret) as http_b,
        Client(streamable_http_client(servers.urls[0], http_client=http_a)) as a,
        Client(streamable_http_client(servers.urls[1], http_client=http_b)) as b,
    ):
        yield a, b


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return payload(await client.call_tool(tool, args))


async def found(client: Client, query: str) -> list[tuple[str, str]]:
    """(path, excerpt) of every result of a keyword search."""
    body = await call(client, "search_knowledge", {"query": query, "mode": "lexical"})
    return [(item["path"], item["excerpt"]) for item in body["results"]]


async def same_on_both(a: Client, b: Client, query: str) -> list[tuple[str, str]]:
    """The results of `query`, which both servers must give identically, in every mode."""
    answer = await found(a, query)
    assert await found(b, query) == answer
    for mode in ("hybrid", "semantic", "rrf"):
        args = {"query": query, "mode": mode}
        first = await call(a, "search_knowledge", args)
        assert (await call(b, "search_knowledge", args))["results"] == first["results"]
    return answer


def cli(kbmcp: Callable[..., Run], servers: Servers, *args: str | Path) -> Run:
    """`kbmcp --db DB ARGS...`: the write comes from a third process-like caller."""
    result = kbmcp("--db", str(servers.db), *args)
    assert result.code == 0, result.err
    return result


async def test_a_document_added_is_found_by_both_servers_on_their_next_request(
    servers: Servers, kbmcp: Callable[..., Run], tmp_path: Path
) -> None:
    folder = write(tmp_path / "more", {"wombat.md": "# Wombats\n\nThe wombat digs burrows.\n"})
    async with both(servers, "acme") as (a, b):
        assert await same_on_both(a, b, "wombat") == []
        cli(kbmcp, servers, "add", folder, "--kb", "acme-notes", "--tenant", "acme")
        assert await same_on_both(a, b, "wombat") == [
            ("wombat.md", "# Wombats\n\nThe wombat digs burrows.")
        ]
        # A new revision replaces the old text on both: no stale excerpt, no stale chunk.
        write(folder, {"wombat.md": "# Wombats\n\nThe wombat sleeps by day.\n"})
        cli(kbmcp, servers, "add", folder, "--kb", "acme-notes", "--tenant", "acme")
        assert await same_on_both(a, b, "wombat") == [
            ("wombat.md", "# Wombats\n\nThe wombat sleeps by day.")
        ]
        assert await same_on_both(a, b, "burrows") == []


async def test_a_share_and_its_end_reach_both_servers_on_their_next_request(
    servers: Servers, kbmcp: Callable[..., Run]
) -> None:
    async with both(servers, "acme") as (a, b):
        assert await same_on_both(a, b, "narwhal") == []
        cli(kbmcp, servers, "kb", "share", "beta-docs", "--tenant", "acme")
        shared = await same_on_both(a, b, "narwhal")
        assert [path for path, _ in shared] == ["onboarding.md"]
        cli(kbmcp, servers, "kb", "unshare", "beta-docs", "--tenant", "acme")
        assert await same_on_both(a, b, "narwhal") == []


async def test_a_token_revoked_is_refused_by_both_servers_on_their_next_request(
    servers: Servers, kbmcp: Callable[..., Run]
) -> None:
    statuses: dict[str, list[int]] = {"a": [], "b": []}

    def recorder(name: str) -> Callable[[httpx2.Response], Any]:
        async def record(response: httpx2.Response) -> None:
            statuses[name].append(response.status_code)

        return record

    secret = servers.secrets["to-revoke"]
    async with (
        bearer_client(secret) as http_a,
        bearer_client(secret) as http_b,
    ):
        http_a.event_hooks["response"].append(recorder("a"))
        http_b.event_hooks["response"].append(recorder("b"))
        async with (
            Client(streamable_http_client(servers.urls[0], http_client=http_a)) as a,
            Client(streamable_http_client(servers.urls[1], http_client=http_b)) as b,
        ):
            assert [path for path, _ in await found(a, "narwhal")] == ["onboarding.md"]
            assert [path for path, _ in await found(b, "narwhal")] == ["onboarding.md"]
            assert statuses["a"][-1] == statuses["b"][-1] == 200
            cli(kbmcp, servers, "token", "revoke", servers.token_ids["to-revoke"])
            for name, client in (("a", a), ("b", b)):
                with pytest.raises(MCPError):
                    await client.call_tool("search_knowledge", {"query": "narwhal"})
                assert statuses[name][-1] == 401


async def memories_found(client: Client, query: str) -> list[tuple[str, str]]:
    """(memory id, excerpt) of the memories a keyword search finds."""
    body = await call(client, "search_knowledge", {"query": query, "mode": "lexical"})
    return [(hit["document_id"], hit["excerpt"]) for hit in body["results"]]


async def memory_counts(client: Client) -> dict[str, int]:
    stores = (await call(client, "list_memory_stores", {}))["memory_stores"]
    return {store["name"]: store["memory_count"] for store in stores}


async def test_a_memory_remembered_on_one_server_is_found_and_forgotten_on_the_other(
    servers: Servers,
) -> None:
    async with both(servers, "acme-memory") as (a, b):
        assert await memories_found(a, "platypus") == await memories_found(b, "platypus") == []
        counts = await memory_counts(b)
        made = await call(a, "remember", {"content": "The platypus lays eggs."})
        assert made["outcome"] == "created", made
        memory = made["memory_id"]
        assert await memories_found(b, "platypus") == [(memory, "The platypus lays eggs.")]
        assert sum((await memory_counts(b)).values()) == sum(counts.values()) + 1
        # The same fact remembered through the other server is the same memory.
        again = await call(b, "remember", {"content": "The platypus lays eggs."})
        assert (again["memory_id"], again["outcome"]) == (memory, "existing")
        # A revision through B replaces the text A serves.
        revised = await call(
            b, "remember", {"content": "The platypus lays two eggs.", "memory_id": memory}
        )
        assert revised["outcome"] == "revised", revised
        assert await memories_found(a, "platypus") == [(memory, "The platypus lays two eggs.")]
        await call(b, "forget", {"memory_id": memory})
        assert await memories_found(a, "platypus") == []
        assert sum((await memory_counts(a)).values()) == sum(counts.values())
        gone = await call(a, "search_knowledge", {"document_id": memory})
        assert gone["error"]["code"] == "resource_unavailable", gone
