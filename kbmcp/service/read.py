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
from kbmcp.search.models import (
    DEFAULT_LIMIT_CHARS,
    MAX_KNOWLEDGE_BASE_IDS,
    MAX_LIMIT_CHARS,
    Citation,
    InlineContent,
    Reference,
    chunk_citation,
    reference,
)
from kbmcp.store.catalog import RESULT_KIND
from kbmcp.store.reads import DocumentRevision
from kbmcp.validate import integer
from kbmcp.workspace import Workspace

MAX_CHUNK_IDS = 50
MAX_REVISIONS = 100  # revisions listed by a read or an outline, newest first


# Archived documents stay readable by id (a window, an outline, their chunks), so old citations
# resolve; only search and scan leave them out. A forgotten memory is not served at all.
DocumentStatus = Annotated[
    str,
    Described("archived: out of search and scan, still readable by id."),
]


@dataclass(frozen=True)
class RevisionInfo:
    revision_id: Annotated[str, Described("Pass as revision_id to read it.")]
    revision_number: Annotated[int, Described("1, 2, ... in order added.")]
    created_at: str
    sha256: Annotated[str, Described("SHA-256 of the revision's whole text.")]
    is_current: Annotated[bool, Described("The one search sees.")]


Revisions = Annotated[
    list[RevisionInfo],
    Described("Newest first, at most 100; each stays readable by id."),
]
RevisionsTruncated = Annotated[bool, Described("Older revisions were left out.")]
KnowledgeBaseName = Annotated[str, Described("Of the knowledge base (or memory store).")]
OwnerTenantId = Annotated[str, Described("ten_...: yours, or whoever shared it.")]
OwnerTenant = Annotated[str, Described("That tenant's name.")]
Source = Annotated[
    str | None,
    Described("Where the text came from (a file's path, a memory's source)."),
]


@dataclass(frozen=True)
class DocumentWindow:
    document_id: str
    knowledge_base_id: str
    revision_id: str
    revision_number: int
    is_current_revision: bool
    path: str
    title: str
    status: DocumentStatus
    revision_created_at: str
    revision_sha256: Annotated[str, Described("SHA-256 of the revision's whole text.")]
    content: Annotated[str, Described("The window's text.")]
    content_offset: int
    content_limit: int
    content_total_chars: int
    content_truncated: Annotated[bool, Described("Text continues after this window.")]
    next_offset: Annotated[int | None, Described("Pass as offset to read on; null at the end.")]
    line_start: Annotated[int, Described("The window's first line (past the end: the last).")]
    line_end: int
    reference: Reference
    knowledge_base_name: KnowledgeBaseName
    owner_tenant_id: OwnerTenantId
    owner_tenant: OwnerTenant
    source: Source
    revisions: Revisions
    revisions_truncated: RevisionsTruncated


@dataclass(frozen=True)
class OutlineSection:
    level: Annotated[int, Described("Heading level, 1 = top.")]
    title: str
    heading_path: list[str]
    char_start: Annotated[int, Described("Read this section with offset=char_start ...")]
    char_end: Annotated[int, Described("... and limit_chars=char_end-char_start.")]
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
        Described("In order; a range includes its subsections. Empty for plain text."),
    ]
    knowledge_base_name: KnowledgeBaseName
    owner_tenant_id: OwnerTenantId
    owner_tenant: OwnerTenant
    source: Source
    revisions: Revisions
    revisions_truncated: RevisionsTruncated
    status: DocumentStatus


@dataclass(frozen=True)
class FetchedChunk:
    kind: Annotated[Literal["document", "memory"], Described("Of a document or of a memory.")]
    chunk_id: str
    document_id: Annotated[str, Described("doc_..., or a memory's mem_...")]
    knowledge_base_id: Annotated[str, Described("kb_..., or a memory's store mst_...")]
    revision_id: str
    is_current_revision: bool
    title: str
    path: str
    heading_path: list[str]
    text: Annotated[
        str,
        Described("A fragment of the revision unless covers_whole_revision."),
    ]
    reference: Reference
    citation: Citation
    revision_total_chars: Annotated[int, Described("Characters in the whole revision.")]
    covers_whole_revision: Annotated[bool, Described("The chunk is the whole revision.")]


@dataclass(frozen=True)
class FetchedChunks:
    chunks: Annotated[list[FetchedChunk], Described("Found chunks, in the order asked.")]
    missing: Annotated[list[str], Described("Unknown or unreadable ids.")]


def read_document(
    workspace: Workspace,
    principal: Principal,
    document_id: str,
    *,
    revision_id: str | None = None,
    offset: int = 0,
    limit_chars: int = DEFAULT_LIMIT_CHARS,
    knowledge_base_ids: Sequence[str] | None = None,
) -> DocumentWindow:
    """A window of `limit_chars` characters starting at `offset` of the current (or given)
    revision. Past the end is an empty window, not an error, so a reader can loop on
    `next_offset` until it is None. With `knowledge_base_ids`, the document must lie in one of
    them (as in a scoped search)."""
    offset = integer(offset, "offset", 0)
    limit_chars = integer(limit_chars, "limit_chars", 1, MAX_LIMIT_CHARS)
    row = _document_revision(workspace, principal, document_id, revision_id, knowledge_base_ids)
    window = _window(row, offset, limit_chars)
    line_start, line_end = _window_lines(row.content, offset, offset + len(window.content))
    revisions, more = _revisions(workspace, row)
    return DocumentWindow(
        document_id=row.document_id,
        knowledge_base_id=row.knowledge_base_id,
        revision_id=row.revision_id,
        revision_number=row.revision_number,
        is_current_revision=row.is_current,
        path=row.path,
        title=row.title,
        status=row.status,
        revision_created_at=row.created_at,
        revision_sha256=row.sha256,
        content=window.content,
        content_offset=window.content_offset,
        content_limit=window.content_limit,
        content_total_chars=window.content_total_chars,
        content_truncated=window.content_truncated,
        next_offset=window.next_offset,
        line_start=line_start,
        line_end=line_end,
        reference=reference(
            row.knowledge_base_name, row.path, line_start, line_end, row.revision_id
        ),
        knowledge_base_name=row.knowledge_base_name,
        owner_tenant_id=row.owner_tenant_id,
        owner_tenant=row.owner_tenant,
        source=row.source,
        revisions=revisions,
        revisions_truncated=more,
    )


def inline_content(
    workspace: Workspace,
    principal: Principal,
    document_id: str,
    revision_id: str,
    limit_chars: int,
    *,
    whole: bool = False,
) -> InlineContent:
    """The start of a revision as include_content inlines it in a query result: the targeted
    read's window from offset 0 (`whole`: all of it, for a memory)."""
    row = _document_revision(workspace, principal, document_id, revision_id)
    return _window(row, 0, max(row.total_chars, 1) if whole else limit_chars)


def _window(row: DocumentRevision, offset: int, limit_chars: int) -> InlineContent:
    """`limit_chars` characters of the revision from `offset` (past the end: empty)."""
    text = row.content[offset : offset + limit_chars]
    end = offset + len(text)
    truncated = end < row.total_chars
    return InlineContent(
        content=neutralise(text),
        content_offset=offset,
        content_limit=limit_chars,
        content_total_chars=row.total_chars,
        content_truncated=truncated,
        next_offset=end if truncated else None,
    )


def document_outline(
    workspace: Workspace,
    principal: Principal,
    document_id: str,
    *,
    revision_id: str | None = None,
    knowledge_base_ids: Sequence[str] | None = None,
) -> DocumentOutline:
    row = _document_revision(workspace, principal, document_id, revision_id, knowledge_base_ids)
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
        for h in outline(row.content, row.kind)
    ]
    revisions, more = _revisions(workspace, row)
    return DocumentOutline(
        document_id=row.document_id,
        knowledge_base_id=row.knowledge_base_id,
        revision_id=row.revision_id,
        path=row.path,
        title=row.title,
        content_total_chars=row.total_chars,
        sections=sections,
        knowledge_base_name=row.knowledge_base_name,
        owner_tenant_id=row.owner_tenant_id,
        owner_tenant=row.owner_tenant,
        source=row.source,
        revisions=revisions,
        revisions_truncated=more,
        status=row.status,
    )


@dataclass(frozen=True)
class DocumentText:
    """A whole revision as an MCP resource serves it: its text (neutralised, as every returned
    text is) and where it comes from."""

    revision: DocumentRevision
    text: str
    line_end: int  # the last line


@dataclass(frozen=True)
class SectionText:
    """One section of a revision's outline (1-based `number`, in document order) and its text."""

    document: DocumentText
    number: int
    title: str
    text: str
    line_start: int
    line_end: int


def document_text(
    workspace: Workspace, principal: Principal, document_id: str, *, revision_id: str | None = None
) -> DocumentText:
    """The whole text of the current (or given) revision of a document or memory, under the
    same rules as a targeted read (readable, or `resource_unavailable`)."""
    row = _document_revision(workspace, principal, document_id, revision_id)
    return DocumentText(
        row, neutralise(row.content), _window_lines(row.content, 0, row.total_chars)[1]
    )


def section_text(
    workspace: Workspace, principal: Principal, document_id: str, number: int
) -> SectionText:
    """Section `number` (1-based, in outline order) of the current revision: its heading and
    the text of its char range (a section includes its subsections)."""
    document = document_text(workspace, principal, document_id)
    sections = outline(document.revision.content, document.revision.kind)
    if not 1 <= number <= len(sections):
        raise ResourceUnavailable(
            f"document {document.revision.document_id} has {len(sections)} sections; there is "
            f"no section {number}",
            details={"document_id": document.revision.document_id, "sections": len(sections)},
        )
    section = sections[number - 1]
    return SectionText(
        document,
        number,
        section.title,
        document.text[section.char_start : section.char_end],
        section.line_start,
        section.line_end,
    )


def fetch_chunks(
    workspace: Workspace, principal: Principal, chunk_ids: Sequence[str]
) -> FetchedChunks:
    """The stored text of chunks by id (of documents and memories), in the order asked; unknown
    or unreadable ids, and chunks of forgotten memories, are listed in `missing` while the rest
    are returned."""
    can_read = readable(workspace.store, workspace.conn, principal)
    wanted = check_id_list("chunk", chunk_ids, argument="chunk_ids", limit=MAX_CHUNK_IDS)
    rows = workspace.store.reads.chunks(workspace.conn, wanted, can_read.all_ids)
    found = {}
    for row in rows:
        headings = json.loads(row.heading_path)
        found[row.chunk_id] = FetchedChunk(
            kind=RESULT_KIND[row.store_kind],
            chunk_id=row.chunk_id,
            document_id=row.document_id,
            knowledge_base_id=row.knowledge_base_id,
            revision_id=row.revision_id,
            is_current_revision=row.is_current,
            title=row.title,
            path=row.path,
            heading_path=headings,
            text=neutralise(row.text),
            reference=reference(
                row.knowledge_base_name, row.path, row.line_start, row.line_end, row.revision_id
            ),
            citation=chunk_citation(row, row.document_kind, headings, row.sha256),
            revision_total_chars=row.revision_chars,
            covers_whole_revision=row.covers_whole,
        )
    return FetchedChunks(
        chunks=[found[c] for c in wanted if c in found],
        missing=[c for c in wanted if c not in found],
    )


def _document_revision(
    workspace: Workspace,
    principal: Principal,
    document_id: str,
    revision_id: str | None,
    knowledge_base_ids: Sequence[str] | None = None,
) -> DocumentRevision:
    # A memory (mem_...) is read like a document: by its id, from its stores.
    is_memory = isinstance(document_id, str) and document_id.strip().startswith("mem_")
    principal.require(MEMORY_READ if is_memory else READ)
    doc_id = check_id("memory" if is_memory else "document", document_id, argument="document_id")
    rev_id = (
        None if revision_id is None else check_id("revision", revision_id, argument="revision_id")
    )
    conn = workspace.conn
    readable_ids = (readable_memory_store_ids if is_memory else readable_kb_ids)(
        workspace.store, conn, principal
    )
    selected = None
    if knowledge_base_ids is not None:
        selected = _selected_knowledge_bases(workspace, principal, knowledge_base_ids)
    row = workspace.store.reads.document_revision(conn, doc_id, rev_id, readable_ids)
    noun = f"{'memory' if is_memory else 'document'} {doc_id}"
    if row is None:
        what = f"revision {rev_id} of {noun}" if rev_id else noun
        raise ResourceUnavailable(
            f"{what} does not exist or is not readable",
            details={"document_id": doc_id, "revision_id": rev_id},
        )
    if selected is not None and row.knowledge_base_id not in selected:
        raise ResourceUnavailable(
            f"{noun} is not in the selected knowledge_base_ids",
            details={"argument": "document_id", "document_id": doc_id,
                     "knowledge_base_ids": sorted(selected)},
        )  # fmt: skip
    return row


def _selected_knowledge_bases(
    workspace: Workspace, principal: Principal, knowledge_base_ids: Sequence[str]
) -> set[str]:
    """The requested knowledge bases, each validated as a scoped search validates them: well
    formed, and readable (else `resource_unavailable` naming them)."""
    wanted = check_id_list(
        "knowledge_base",
        knowledge_base_ids,
        argument="knowledge_base_ids",
        limit=MAX_KNOWLEDGE_BASE_IDS,
    )
    conn = workspace.conn
    readable_ids = (
        readable_kb_ids(workspace.store, conn, principal) if READ in principal.scopes else []
    )
    rows = workspace.store.reads.resolve_knowledge_base_ids(conn, wanted, readable_ids)
    unknown = [public_id for public_id, row_id in rows if row_id is None]
    if unknown:
        raise ResourceUnavailable(
            f"not found or not readable: knowledge_base_ids: {', '.join(unknown)}",
            details={"argument": "knowledge_base_ids", "knowledge_base_ids": unknown},
        )
    return set(wanted)


def _revisions(workspace: Workspace, row: DocumentRevision) -> tuple[list[RevisionInfo], bool]:
    """The document's revisions, newest first, at most MAX_REVISIONS; and whether there are
    more."""
    found = workspace.store.reads.revisions(workspace.conn, row.document_row_id, MAX_REVISIONS + 1)
    revisions = [
        RevisionInfo(r.revision_id, r.number, r.created_at, r.sha256, r.is_current)
        for r in found[:MAX_REVISIONS]
    ]
    return revisions, len(found) > MAX_REVISIONS


def _window_lines(content: str, start: int, end: int) -> tuple[int, int]:
    """The 1-based lines of the characters [start, end) of `content`. An empty window (a read
    past the end, or an empty revision) is a position, not text: both are the line it lies on,
    clamped to the revision's last line, never a range that ends before it starts."""
    if end > start:
        return _line_of(content, start), _line_of(content, end - 1)
    line = _line_of(content, max(min(start, len(content)) - 1, 0))
    return line, line


def _line_of(content: str, index: int) -> int:
    """1-based line number of the character at `index`, counted like the chunker's (and so the
    citations'): a line break is \\r\\n, \\r or \\n."""
    breaks = (
        content.count("\n", 0, index)
        + content.count("\r", 0, index)
        - content.count("\r\n", 0, index)
    )
    return breaks + 1
