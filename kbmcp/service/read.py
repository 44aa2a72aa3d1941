"""Targeted reads: a bounded character window of a document revision, chunks by id, outlines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from kbmcp.access import (
    MEMORY_READ,
    READ,
    Principal,
    readable,
    readable_kb_ids,
    readable_memory_store_ids,
)
from kbmcp.described import Described
from kbmcp.errors import ResourceUnavailable
from kbmcp.ids import check_id, check_id_list
from kbmcp.ingest.chunker import outline
from kbmcp.neutralise import neutralise
from kbmcp.search.models import Citation, page_of
from kbmcp.store.catalog import RESULT_KIND
from kbmcp.validate import integer
from kbmcp.workspace import Workspace

DEFAULT_LIMIT_CHARS = 4000
MAX_LIMIT_CHARS = 10_000
MAX_CHUNK_IDS = 50

SELECT_DOCUMENT_REVISION = """
SELECT d.public_id, kb.public_id, d.path, d.title, d.kind, d.status,
       r.public_id, r.number, r.content, r.char_count, r.line_count, r.created_at,
       cur.public_id, r.content_hash
FROM document AS d
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
JOIN revision AS r ON r.document_id = d.id
LEFT JOIN revision AS cur ON cur.id = d.current_revision_id
WHERE d.public_id = :document_id
  AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids))
  AND (CASE WHEN :revision_id IS NULL THEN r.id = d.current_revision_id
            ELSE r.public_id = :revision_id END)
  -- A forgotten memory is not served again (as in SELECT_CHUNKS).
  AND (kb.kind = 'documents' OR d.status = 'published')
"""

SELECT_CHUNKS = """
SELECT c.public_id, d.public_id, kb.public_id, r.public_id, d.path, d.title, c.heading_path,
       c.char_start, c.char_end, c.line_start, c.line_end, c.text,
       r.id = d.current_revision_id AS is_current, d.kind, r.content_hash, kb.kind
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE c.public_id IN (SELECT value FROM json_each(:chunk_ids))
  AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_ids))
  -- A forgotten memory is not served again (its rows stay for audit); an archived document's
  -- chunks stay readable by id, so old citations resolve.
  AND (kb.kind = 'documents' OR d.status = 'published')
"""


@dataclass(frozen=True)
class DocumentWindow:
    document_id: str
    knowledge_base_id: str
    revision_id: str
    revision_number: int
    is_current_revision: bool
    path: str
    title: str
    status: str
    revision_created_at: str
    revision_sha256: Annotated[
        str, Described("SHA-256 of the revision's whole text: the exact source of `content`.")
    ]
    content: Annotated[str, Described("The requested window of the revision's text.")]
    content_offset: int
    content_limit: int
    content_total_chars: int
    content_truncated: Annotated[bool, Described("Text continues after this window.")]
    next_offset: Annotated[int | None, Described("Pass as offset to read on; null at the end.")]
    line_start: int
    line_end: int


@dataclass(frozen=True)
class OutlineSection:
    level: Annotated[int, Described("Heading level, 1 = top.")]
    title: str
    heading_path: list[str]
    char_start: Annotated[int, Described("Read this section with offset=char_start ...")]
    char_end: Annotated[int, Described("... and limit_chars=char_end-char_start (max 10000).")]
    line_start: int
    line_end: int


@dataclass(frozen=True)
class DocumentOutline:
    document_id: str
    knowledge_base_id: str
    revision_id: str
    path: str
    title: str
    content_total_chars: int
    sections: Annotated[
        list[OutlineSection],
        Described(
            "Headings in document order; a section's range includes its subsections. "
            "Empty for plain text and code."
        ),
    ]


@dataclass(frozen=True)
class FetchedChunk:
    kind: Annotated[Literal["document", "memory"], Described("Of a document or of a memory.")]
    chunk_id: str
    document_id: Annotated[str, Described("The document's id, or the memory's (mem_...).")]
    knowledge_base_id: Annotated[
        str, Described("The knowledge base's id, or the memory store's (mst_...).")
    ]
    revision_id: str
    is_current_revision: bool
    title: str
    path: str
    heading_path: list[str]
    text: str
    citation: Citation


@dataclass(frozen=True)
class FetchedChunks:
    chunks: Annotated[list[FetchedChunk], Described("Found chunks, in the order asked.")]
    missing: Annotated[list[str], Described("Requested ids that are unknown or not readable.")]


def read_document(
    workspace: Workspace,
    principal: Principal,
    document_id: str,
    *,
    revision_id: str | None = None,
    offset: int = 0,
    limit_chars: int = DEFAULT_LIMIT_CHARS,
) -> DocumentWindow:
    """A window of `limit_chars` characters starting at `offset` of the current (or given)
    revision. Past the end is an empty window, not an error, so a reader can loop on
    `next_offset` until it is None."""
    offset = integer(offset, "offset", 0)
    limit_chars = integer(limit_chars, "limit_chars", 1, MAX_LIMIT_CHARS)
    row = _document_revision(workspace, principal, document_id, revision_id)
    (doc_id, kb_id, path, title, _kind, status, rev_id, number, content, total, _lines,
     created_at, current_rev_id, sha256) = row  # fmt: skip
    window = content[offset : offset + limit_chars]
    end = offset + len(window)
    truncated = end < total
    return DocumentWindow(
        document_id=doc_id,
        knowledge_base_id=kb_id,
        revision_id=rev_id,
        revision_number=number,
        is_current_revision=rev_id == current_rev_id,
        path=path,
        title=title,
        status=status,
        revision_created_at=created_at,
        revision_sha256=sha256,
        content=neutralise(window),
        content_offset=offset,
        content_limit=limit_chars,
        content_total_chars=total,
        content_truncated=truncated,
        next_offset=end if truncated else None,
        line_start=_line_of(content, min(offset, total)),
        line_end=_line_of(content, max(min(end, total) - 1, 0)),
    )


def document_outline(
    workspace: Workspace, principal: Principal, document_id: str, *, revision_id: str | None = None
) -> DocumentOutline:
    row = _document_revision(workspace, principal, document_id, revision_id)
    doc_id, kb_id, path, title, kind, _status, rev_id, _number, content, total, *_ = row
    sections = [
        OutlineSection(
            level=h.level,
            title=h.title,
            heading_path=list(h.heading_path),
            char_start=h.char_start,
            char_end=h.char_end,
            line_start=h.line_start,
            line_end=h.line_end,
        )
        for h in outline(content, kind)
    ]
    return DocumentOutline(doc_id, kb_id, rev_id, path, title, total, sections)


def fetch_chunks(
    workspace: Workspace, principal: Principal, chunk_ids: Sequence[str]
) -> FetchedChunks:
    """The stored text of chunks by id (of documents and memories), in the order asked; unknown
    or unreadable ids, and chunks of forgotten memories, are listed in `missing` while the rest
    are returned."""
    can_read = readable(workspace.conn, principal)
    wanted = check_id_list("chunk", chunk_ids, argument="chunk_ids", limit=MAX_CHUNK_IDS)
    rows = workspace.conn.execute(
        SELECT_CHUNKS,
        {"chunk_ids": json.dumps(wanted), "readable_ids": json.dumps(can_read.all_ids)},
    ).fetchall()
    found = {}
    for (chunk_id, doc_id, kb_id, rev_id, path, title, heading, char_start, char_end,
         line_start, line_end, text, is_current, kind, sha256, store_kind) in rows:  # fmt: skip
        headings = json.loads(heading)
        found[chunk_id] = FetchedChunk(
            kind=RESULT_KIND[store_kind],
            chunk_id=chunk_id,
            document_id=doc_id,
            knowledge_base_id=kb_id,
            revision_id=rev_id,
            is_current_revision=bool(is_current),
            title=title,
            path=path,
            heading_path=headings,
            text=neutralise(text),
            citation=Citation(
                path,
                rev_id,
                line_start,
                line_end,
                char_start,
                char_end,
                page_of(kind, headings),
                sha256,
            ),
        )
    return FetchedChunks(
        chunks=[found[c] for c in wanted if c in found],
        missing=[c for c in wanted if c not in found],
    )


def _document_revision(
    workspace: Workspace, principal: Principal, document_id: str, revision_id: str | None
) -> tuple:
    # A memory (mem_...) is read like a document: by its id, from its stores.
    is_memory = isinstance(document_id, str) and document_id.strip().startswith("mem_")
    principal.require(MEMORY_READ if is_memory else READ)
    doc_id = check_id("memory" if is_memory else "document", document_id, argument="document_id")
    rev_id = (
        None if revision_id is None else check_id("revision", revision_id, argument="revision_id")
    )
    conn = workspace.conn
    readable_ids = (readable_memory_store_ids if is_memory else readable_kb_ids)(conn, principal)
    row = conn.execute(
        SELECT_DOCUMENT_REVISION,
        {"document_id": doc_id, "revision_id": rev_id, "readable_kb_ids": json.dumps(readable_ids)},
    ).fetchone()
    if row is None:
        noun = f"{'memory' if is_memory else 'document'} {doc_id}"
        what = f"revision {rev_id} of {noun}" if rev_id else noun
        raise ResourceUnavailable(
            f"{what} does not exist or is not readable",
            details={"document_id": doc_id, "revision_id": rev_id},
        )
    return row


def _line_of(content: str, index: int) -> int:
    """1-based line number of the character at `index`, counted like the chunker's (and so the
    citations'): a line break is \\r\\n, \\r or \\n."""
    breaks = (
        content.count("\n", 0, index)
        + content.count("\r", 0, index)
        - content.count("\r\n", 0, index)
    )
    return breaks + 1
