"""Chunk fetch and targeted reads: the follow-ups to a search result."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.search.models import SearchRequest
from kbmcp.service.read import fetch_chunks, read_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest, write_small_corpus


@pytest.fixture
def ws(workspace: Workspace, tmp_path: Path) -> Workspace:
    ingest(workspace, write_small_corpus(tmp_path))
    return workspace


def test_fetch_returns_known_chunks_in_order_and_lists_missing(ws: Workspace) -> None:
    results = search(ws, ws.local_principal(), SearchRequest("keys", limit=2)).results
    wanted = [results[1].chunk_id, "chk_0000000000000000", results[0].chunk_id]
    fetched = fetch_chunks(ws, ws.local_principal(), wanted)
    assert [c.chunk_id for c in fetched.chunks] == [results[1].chunk_id, results[0].chunk_id]
    assert fetched.missing == ["chk_0000000000000000"]
    assert fetched.chunks[1].citation == results[0].citation
    with pytest.raises(InvalidRequest):
        fetch_chunks(ws, ws.local_principal(), ["not-an-id"])


def test_read_window_of_the_cited_revision(ws: Workspace) -> None:
    result = search(ws, ws.local_principal(), SearchRequest("revoke the old token")).results[0]
    cite = result.citation
    window = read_document(
        ws,
        ws.local_principal(),
        result.document_id,
        revision_id=cite.revision_id,
        offset=cite.char_start,
        limit_chars=cite.char_end - cite.char_start,
    )
    chunk = fetch_chunks(ws, ws.local_principal(), [result.chunk_id]).chunks[0]
    assert window.content == chunk.text
    assert window.content_truncated == (cite.char_end < window.content_total_chars)
    assert window.next_offset == (cite.char_end if window.content_truncated else None)


def test_read_pages_until_next_offset_is_none(ws: Workspace) -> None:
    doc_id = ws.conn.execute(
        "SELECT public_id FROM document WHERE path = 'guide/search.md'"
    ).fetchone()[0]
    parts, offset = [], 0
    while offset is not None:
        window = read_document(ws, ws.local_principal(), doc_id, offset=offset, limit_chars=100)
        parts.append(window.content)
        offset = window.next_offset
    full = read_document(ws, ws.local_principal(), doc_id, limit_chars=10_000)
    assert "".join(parts) == full.content and not full.content_truncated
    for bad in (0, 10_001):
        with pytest.raises(InvalidRequest):
            read_document(ws, ws.local_principal(), doc_id, limit_chars=bad)
    with pytest.raises(ResourceUnavailable):
        read_document(ws, ws.local_principal(), "doc_0000000000000000")
