"""Documents and memory stores as MCP resources (issue 34, item 7), through the official SDK
client: listed page by page, read as text with a MIME type, by document, revision and section;
under the same tokens, scopes, allow-lists and shares as the tools, over stdio and HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer

from kbmcp.server import resources as resources_module
from kbmcp.service.tenants import share_knowledge_base, unshare_knowledge_base
from tests.access_support import admin_workspace, build_two_tenants, connect_with_token, make_token
from tests.mcp_support import ONCALL_V1, HttpServer, payload, stdio_params
from tests.store_backends import database_on

pytestmark = pytest.mark.anyio

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return payload(await client.call_tool(tool, arguments))


async def every_resource(client: Client) -> list[Any]:
    """Every page of resources/list, following nextCursor."""
    found, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        found += page.resources
        cursor = page.next_cursor
        if cursor is None:
            return found


async def by_path(client: Client) -> dict[str, dict[str, Any]]:
    page = await call(client, "list_documents", {})
    return {doc["path"]: doc for doc in page["documents"]}


async def read_text(client: Client, uri: str) -> tuple[str, str | None, dict[str, Any]]:
    result = await client.read_resource(uri)
    [contents] = result.contents
    return contents.text, contents.mime_type, contents.meta or {}  # type: ignore[union-attr]


# ------------------------------------------------------------------ in-process, both backends


@pytest.fixture
async def client(inprocess_server: MCPServer) -> Any:
    async with Client(inprocess_server) as connected:
        yield connected


async def test_resources_list_pages_through_documents_then_memory_stores(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources_module, "PAGE", 2)
    remembered = await call(client, "remember", {"content": "The staging key rotates on Fridays."})
    listed = await every_resource(client)
    documents = (await call(client, "list_documents", {}))["documents"]
    stores = (await call(client, "list_memory_stores", {}))["memory_stores"]
    assert [str(r.uri) for r in listed] == [
        *(f"kbmcp://documents/{doc['document_id']}" for doc in documents),
        *(f"kbmcp://memory-stores/{store['memory_store_id']}" for store in stores),
    ]
    first = await client.list_resources()
    assert len(first.resources) == 2 and first.next_cursor is not None
    by_name = {r.name: r for r in listed}
    runbook = by_name["handbook:ops/runbook.md"]
    assert (runbook.title, runbook.mime_type) == ("Database runbook", "text/markdown")
    assert by_name["research:notes.txt"].mime_type == "text/plain"
    store = next(r for r in listed if str(r.uri).endswith(remembered["memory_store_id"]))
    text, mime, _ = await read_text(client, str(store.uri))
    assert mime == "text/markdown" and remembered["memory_id"] in text
    assert "The staging key rotates on Fridays." in text


async def test_templates_name_a_document_a_revision_and_a_section(client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [
        "kbmcp://documents/{document_id}",
        "kbmcp://documents/{document_id}/revisions/{revision_id}",
        "kbmcp://documents/{document_id}/sections/{section}",
    ]


async def test_a_document_reads_as_the_tools_read_it(client: Client) -> None:
    documents = {
        doc["path"]: doc for doc in (await call(client, "list_documents", {}))["documents"]
    }
    runbook = documents["ops/runbook.md"]
    window = await call(
        client, "search_knowledge", {"document_id": runbook["document_id"], "limit_chars": 10000}
    )
    text, mime, meta = await read_text(client, f"kbmcp://documents/{runbook['document_id']}")
    assert text == window["content"] and mime == "text/markdown"
    assert meta["revision_id"] == runbook["current_revision_id"]
    assert meta["reference"] == window["reference"]
    notes = documents["notes.txt"]
    _, notes_mime, _ = await read_text(client, f"kbmcp://documents/{notes['document_id']}")
    assert notes_mime == "text/plain"


async def test_an_older_revision_reads_by_its_id(client: Client) -> None:
    documents = {
        doc["path"]: doc for doc in (await call(client, "list_documents", {}))["documents"]
    }
    oncall = documents["ops/oncall.md"]
    window = await call(client, "search_knowledge", {"document_id": oncall["document_id"]})
    older = next(r for r in window["revisions"] if not r["is_current"])
    uri = f"kbmcp://documents/{oncall['document_id']}/revisions/{older['revision_id']}"
    text, _, meta = await read_text(client, uri)
    assert text == ONCALL_V1 and meta["is_current_revision"] is False


async def test_a_section_reads_as_its_outline_range(client: Client) -> None:
    documents = {
        doc["path"]: doc for doc in (await call(client, "list_documents", {}))["documents"]
    }
    doc_id = documents["ops/runbook.md"]["document_id"]
    outline = await call(client, "search_knowledge", {"document_id": doc_id, "outline": True})
    number, restore = next(
        (n, s) for n, s in enumerate(outline["sections"], start=1) if s["title"] == "Restore"
    )
    window = await call(
        client,
        "search_knowledge",
        {
            "document_id": doc_id,
            "offset": restore["char_start"],
            "limit_chars": restore["char_end"] - restore["char_start"],
        },
    )
    text, _, meta = await read_text(client, f"kbmcp://documents/{doc_id}/sections/{number}")
    assert text == window["content"] and text.startswith("### Restore")
    assert (meta["section"], meta["heading"]) == (number, "Restore")
    assert meta["reference"].startswith(f"handbook:ops/runbook.md#L{restore['line_start']}-")


@pytest.mark.parametrize(
    ("uri", "code"),
    [
        ("kbmcp://documents/doc_0123456789abcdef", RESOURCE_NOT_FOUND),
        ("kbmcp://documents/not-an-id", INVALID_PARAMS),
        ("kbmcp://documents/doc_0123456789abcdef/sections/1", RESOURCE_NOT_FOUND),
        ("kbmcp://memory-stores/mst_0123456789abcdef", RESOURCE_NOT_FOUND),
        ("https://example.com/doc", INVALID_PARAMS),
    ],
)
async def test_unreadable_or_malformed_uris_are_errors(client: Client, uri: str, code: int) -> None:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    assert caught.value.error.code == code


async def test_a_section_past_the_outline_is_not_found(client: Client) -> None:
    documents = {
        doc["path"]: doc for doc in (await call(client, "list_documents", {}))["documents"]
    }
    with pytest.raises(MCPError) as caught:
        await client.read_resource(
            f"kbmcp://documents/{documents['ops/runbook.md']['document_id']}/sections/99"
        )
    assert caught.value.error.code == RESOURCE_NOT_FOUND
    assert "sections" in caught.value.error.message


async def test_a_cursor_that_is_not_one_is_invalid(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.list_resources(cursor="not-a-cursor")
    assert caught.value.error.code == INVALID_PARAMS


# ------------------------------------------------------------------ tokens, stdio and HTTP


@dataclass(frozen=True)
class Tenants:
    db: Path | str
    file: Path
    url: str
    read_only: str  # beta's knowledge:read token
    acme_failover: str  # a document of another tenant


@pytest.fixture(scope="module")
def tenants(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Tenants]:
    root = tmp_path_factory.mktemp("resources")
    db = root / "kb.db"
    build_two_tenants(root, db)
    _, secret = make_token(db, "beta", ["knowledge:read"])
    with admin_workspace(db) as ws:
        row = ws.conn.execute("SELECT public_id FROM document WHERE path = 'failover.md'")
        failover = next(iter(row))[0]
    served = database_on(backend, db, request)
    server = HttpServer(served)
    try:
        yield Tenants(served, db, server.url, secret, failover)
    finally:
        server.stop()


async def check_read_only_caller(client: Client, tenants: Tenants) -> None:
    """beta's read-only token: lists and reads its own document, is refused acme's."""
    listed = await every_resource(client)
    assert [r.name for r in listed] == ["beta-docs:onboarding.md"]
    text, mime, _ = await read_text(client, str(listed[0].uri))
    assert "narwhal badge" in text and mime == "text/markdown"
    for uri in (
        f"kbmcp://documents/{tenants.acme_failover}",
        f"kbmcp://documents/{tenants.acme_failover}/sections/1",
    ):
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
        assert caught.value.error.code == RESOURCE_NOT_FOUND
        assert "zanzibar" not in str(caught.value.error).lower()


async def test_a_read_only_token_over_http_lists_reads_and_is_refused(tenants: Tenants) -> None:
    async with connect_with_token(tenants.url, tenants.read_only) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        await check_read_only_caller(client, tenants)


@pytest.mark.sqlite_only("a stdio server on the file; HTTP covers the PostgreSQL copy")
async def test_a_read_only_token_over_stdio_lists_reads_and_is_refused(tenants: Tenants) -> None:
    async with Client(stdio_params(tenants.file, KBMCP_TOKEN=tenants.read_only)) as client:
        await check_read_only_caller(client, tenants)


async def test_a_revoked_share_hides_its_resources_on_the_next_request(tenants: Tenants) -> None:
    async with connect_with_token(tenants.url, tenants.read_only) as client:
        with admin_workspace(tenants.db) as ws:
            share_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
        try:
            names = {r.name for r in await every_resource(client)}
            assert names == {"beta-docs:onboarding.md", "acme-ops:failover.md"}
            text, _, _ = await read_text(client, f"kbmcp://documents/{tenants.acme_failover}")
            assert "Zanzibar" in text
        finally:
            with admin_workspace(tenants.db) as ws:
                unshare_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
        # The same session, the next requests: gone from the list and refused.
        assert [r.name for r in await every_resource(client)] == ["beta-docs:onboarding.md"]
        with pytest.raises(MCPError) as caught:
            await client.read_resource(f"kbmcp://documents/{tenants.acme_failover}")
        assert caught.value.error.code == RESOURCE_NOT_FOUND
