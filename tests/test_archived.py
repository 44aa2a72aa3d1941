"""Archived documents and forgotten memories read by id, as docs/tools.md says: an archived
document (its file removed, `add --prune`) leaves search and scan but stays readable by id
with `status: "archived"` (window, outline, chunks: old citations resolve); as a search filter
it is `resource_unavailable`; a forgotten memory is not served at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths
from tests.mcp_support import connect, hash_workspace, payload, write

pytestmark = pytest.mark.anyio

GUIDE = "# Rotation guide\n\nRotate the signing keys every quarter.\n\n## Audit\n\nLog each one.\n"


async def call(client: Client, **arguments: Any) -> dict[str, Any]:
    return payload(await client.call_tool("search_knowledge", arguments))


async def test_an_archived_document_is_readable_by_id_with_its_status(
    backend_db: Path | str, tmp_path: Path
) -> None:
    db = backend_db
    folder = write(tmp_path / "docs", {"guide.md": GUIDE, "other.md": "# Other\n\nKept.\n"})
    with hash_workspace(db) as ws:
        principal = ws.local_principal()
        add_paths(ws, principal, [folder], IngestOptions(knowledge_base="handbook"))
        forgotten = memories.remember(ws, principal, "A fact that will be forgotten.")
        memories.forget(ws, principal, forgotten.memory_id)
    async with connect("inprocess", db) as client:
        hit = (await call(client, query="signing keys rotate", mode="lexical"))["results"][0]
    (folder / "guide.md").unlink()
    with hash_workspace(db) as ws:
        options = IngestOptions(knowledge_base="handbook", prune=True)
        assert add_paths(ws, ws.local_principal(), [folder], options).archived == 1

    async with connect("inprocess", db) as client:
        document_id = hit["document_id"]
        window = await call(client, document_id=document_id)
        assert window["status"] == "archived" and window["content"].startswith("# Rotation")
        outline = await call(client, document_id=document_id, outline=True)
        assert outline["status"] == "archived"
        assert [s["title"] for s in outline["sections"]] == ["Rotation guide", "Audit"]
        fetched = await call(client, chunk_ids=[hit["chunk_id"]])
        assert [c["chunk_id"] for c in fetched["chunks"]] == [hit["chunk_id"]]
        # Out of search and scan, and refused as a filter.
        assert (await call(client, query="signing keys rotate", mode="lexical"))["results"] == []
        scanned = await call(client)
        assert document_id not in {item["document_id"] for item in scanned["results"]}
        refused = await call(client, query="keys", document_ids=[document_id])
        assert refused["error"]["code"] == "resource_unavailable"
        # A forgotten memory is not served, not even by id.
        gone = await call(client, document_id=forgotten.memory_id)
        assert gone["error"]["code"] == "resource_unavailable"
