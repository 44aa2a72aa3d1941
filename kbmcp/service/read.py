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
    page_of,
)
from kbmcp.store.catalog import RESULT_KIND
from kbmcp.validate import integer
from kbmcp.workspace import Workspace

MAX_CHUNK_IDS = 50
MAX_REVISIONS = 100  # revisions listed by a read or an outline, newest first
# A chunk covers its whole revision when at most this many characters outside it, all blanks
# (BLANKS), are left out: the chunker trims a text's outer whitespace.
WHOLE_CHUNK_BLANK_SLACK = 256
BLANKS = " \t\r\n\f\v"

# The revision to read with where it comes from: its knowledge base (or memory store), the
# tenant that owns it, and the source it was added from.
SELECT_DOCUMENT_REVISION = """
SELECT d.id, d.public_id, kb.public_id, kb.name, owner.public_id, owner.name, d.path, d.title,
       d.kind, d.status, d.source, r.public_id, r.number, r.content, r.char_count, r.created_at,
       r.id = d.current_revision_id, r.content_hash
FROM document AS d
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
JOIN tenant AS owner ON owner.id = kb.tenant_id
JOIN revision AS r ON r.document_id = d.id
WHERE d.public_id = :document_id
  AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids))
  AND (CASE WHEN :revision_id IS NULL THEN r.id = d.current_revision_id
            ELSE r.public_id = :revision_id END)
  -- A forgotten memory is not served again (as in SELECT_CHUNKS).
  AND (kb.kind = 'documents' OR d.status = 'published')
"""

# A document's revisions, newest first (the UNIQUE (document_id, number) index orders them).
SELECT_REVISIONS = """
SELECT r.public_id, r.number, r.created_at, r.content_hash, r.id = d.current_revision_id
FROM revision AS r
JOIN document AS d ON d.id = r.document_id
WHERE r.document_id = :document_row_id
ORDER BY r.number DESC
LIMIT :limit
"""

# The requested knowledge bases the principal can read (a NULL id: unknown or not readable).
RESOLVE_KNOWLEDGE_BASE_IDS = """
SELECT want.value, kb.id
FROM json_each(:knowledge_base_ids) AS want
LEFT JOIN knowledge_base AS kb
       ON kb.public_id = want.value
      AND kb.id IN (SELECT value FROM json_each(:readable_kb_ids))
"""

SELECT_CHUNKS = """
SELECT c.public_id, d.public_id, kb.public_id, r.public_id, d.path, d.title, c.heading_path,
       c.char_start, c.char_end, c.line_start, c.line_end, c.text,
       r.id = d.current_revision_id AS is_current, d.kind, r.content_hash, kb.kind, r.char_count,
       -- The chunk covers its whole revision when only blanks lie outside it (the chunker drops
       -- them). The length test comes first so that a fragment never loads the revision's text.
       r.char_count - (c.char_end - c.char_start) <= :blank_slack
       AND trim(substr(r.content, 1, c.char_start), :blanks) = ''
       AND trim(substr(r.content, c.char_end + 1), :blanks) = '' AS covers_whole
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


# Archived documents stay readable by id (a window, an outline, their chunks), so old citations
# resolve; only search and scan leave them out. A forgotten memory is not served at all.
DocumentStatus = Annotated[
    str,
    Described(
        "published, or archived: left out of search and scan (e.g. its file was removed) but "
        "still readable by id."
    ),
]


@dataclass(frozen=True)
class RevisionInfo:
    revision_id: Annotated[str, Described("Pass as revision_id to read this revision.")]
    revision_number: Annotated[int, Described("1, 2, ... in the order they were added.")]
    created_at: str
    sha256: Annotated[str, Described("SHA-256 of the revision's whole text.")]
    is_current: Annotated[
        bool, Described("The document's current revision (the newest; the one search sees).")
    ]


Revisions = Annotated[
    list[RevisionInfo],
    Described(
        "The document's revisions, newest first (at most 100): pass one's revision_id to read "
        "it; every revision stays readable by id."
    ),
]
RevisionsTruncated = Annotated[
    bool, Described("More than the 100 revisions listed exist (the oldest are left out).")
]
KnowledgeBaseName = Annotated[
    str, Described("The name of the knowledge base (or memory store) the document is in.")
]
OwnerTenantId = Annotated[
    str, Described("The tenant (ten_...) owning the knowledge base: yours, or whoever shared it.")
]
OwnerTenant = Annotated[str, Described("That tenant's name.")]
Source = Annotated[
    str | None,
    Described(
        "Where the text was added from: the file's absolute path at ingest for a document, the "
        "source given to remember for a memory; null when unknown."
    ),
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
    document_id: Annotated[str, Described("The document's id, or the memory's (mem_...).")]
    knowledge_base_id: Annotated[
        str, Described("The knowledge base's id, or the memory store's (mst_...).")
    ]
    revision_id: str
    is_current_revision: bool
    title: str
    path: str
    heading_path: list[str]
    text: Annotated[
        str,
        Described(
            "The chunk's text: a fragment of its revision unless covers_whole_revision (read "
            "the rest with document_id + revision_id + offset)."
        ),
    ]
    citation: Citation
    revision_total_chars: Annotated[
        int, Described("Length of the chunk's whole revision, in characters.")
    ]
    covers_whole_revision: Annotated[
        bool, Described("The chunk is the revision's entire text, not a fragment of it.")
    ]


@dataclass(frozen=True)
class FetchedChunks:
    chunks: Annotated[list[FetchedChunk], Described("Found chunks, in the order asked.")]
    missing: Annotated[list[str], Described("Requested ids that are unknown or not readable.")]


@dataclass(frozen=True)
class _RevisionRow:
    """One row of SELECT_DOCUMENT_REVISION."""

    document_row_id: int
    document_id: str
    knowledge_base_id: str
    knowledge_base_name: str
    owner_tenant_id: str
    owner_tenant: str
    path: str
    title: str
    kind: str
    status: str
    source: str | None
    revision_id: str
    revision_number: int
    content: str
    total_chars: int
    created_at: str
    is_current: bool
    sha256: str


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
        line_start=_line_of(row.content, min(offset, row.total_chars)),
        line_end=_line_of(row.content, max(min(offset + limit_chars, row.total_chars) - 1, 0)),
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


def _window(row: _RevisionRow, offset: int, limit_chars: int) -> InlineContent:
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


def fetch_chunks(
    workspace: Workspace, principal: Principal, chunk_ids: Sequence[str]
) -> FetchedChunks:
    """The stored text of chunks by id (of documents and memories), in the order asked; unknown
    or unreadable ids, and chunks of forgotten memories, are listed in `missing` while the rest
    are returned."""
    can_read = readable(workspace.store, workspace.conn, principal)
    wanted = check_id_list("chunk", chunk_ids, argument="chunk_ids", limit=MAX_CHUNK_IDS)
    rows = workspace.conn.execute(
        SELECT_CHUNKS,
        {
            "chunk_ids": json.dumps(wanted),
            "readable_ids": json.dumps(can_read.all_ids),
            "blank_slack": WHOLE_CHUNK_BLANK_SLACK,
            "blanks": BLANKS,
        },
    ).fetchall()
    found = {}
    for (chunk_id, doc_id, kb_id, rev_id, path, title, heading, char_start, char_end,
         line_start, line_end, text, is_current, kind, sha256, store_kind,
         revision_chars, covers_whole) in rows:  # fmt: skip
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
            revision_total_chars=revision_chars,
            covers_whole_revision=bool(covers_whole),
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
) -> _RevisionRow:
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
    found = conn.execute(
        SELECT_DOCUMENT_REVISION,
        {"document_id": doc_id, "revision_id": rev_id, "readable_kb_ids": json.dumps(readable_ids)},
    ).fetchone()
    noun = f"{'memory' if is_memory else 'document'} {doc_id}"
    if found is None:
        what = f"revision {rev_id} of {noun}" if rev_id else noun
        raise ResourceUnavailable(
            f"{what} does not exist or is not readable",
            details={"document_id": doc_id, "revision_id": rev_id},
        )
    row = _RevisionRow(*found[:16], bool(found[16]), found[17])
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
    rows = conn.execute(
        RESOLVE_KNOWLEDGE_BASE_IDS,
        {"knowledge_base_ids": json.dumps(wanted), "readable_kb_ids": json.dumps(readable_ids)},
    ).fetchall()
    unknown = [public_id for public_id, row_id in rows if row_id is None]
    if unknown:
        raise ResourceUnavailable(
            f"not found or not readable: knowledge_base_ids: {', '.join(unknown)}",
            details={"argument": "knowledge_base_ids", "knowledge_base_ids": unknown},
        )
    return set(wanted)


def _revisions(workspace: Workspace, row: _RevisionRow) -> tuple[list[RevisionInfo], bool]:
    """The document's revisions, newest first, at most MAX_REVISIONS; and whether there are
    more."""
    found = workspace.conn.execute(
        SELECT_REVISIONS, {"document_row_id": row.document_row_id, "limit": MAX_REVISIONS + 1}
    ).fetchall()
    revisions = [
        RevisionInfo(rev_id, number, created_at, sha256, bool(current))
        for rev_id, number, created_at, sha256, current in found[:MAX_REVISIONS]
    ]
    return revisions, len(found) > MAX_REVISIONS


def _line_of(content: str, index: int) -> int:
    """1-based line number of the character at `index`, counted like the chunker's (and so the
    citations'): a line break is \\r\\n, \\r or \\n."""
    breaks = (
        content.count("\n", 0, index)
        + content.count("\r", 0, index)
        - content.count("\r\n", 0, index)
    )
    return breaks + 1
