"""The reads concern of the store contract: what a targeted read needs (a document's revision
with where it comes from, its list of revisions, chunks by id, and the check of a read's
knowledge_base_ids).

Implemented by kbmcp/store/sqlite/reads.py and kbmcp/store/postgres/reads.py (their statements
under `SqlReads`, the logic both share); used by
kbmcp/service/read.py. Every function takes the row ids the caller may read (`readable_ids`):
a row of another store is never returned, so a missing and an unreadable id look the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect

# A chunk covers its whole revision when at most this many characters outside it, all blanks
# (BLANKS), are left out: the chunker trims a text's outer whitespace.
WHOLE_CHUNK_BLANK_SLACK = 256
BLANKS = " \t\r\n\f\v"


@dataclass(frozen=True)
class DocumentRevision:
    """A revision to read, with its document, its knowledge base (or memory store) and the
    tenant that owns it."""

    document_row_id: int
    document_id: str
    knowledge_base_id: str
    knowledge_base_name: str
    owner_tenant_id: str
    owner_tenant: str
    path: str
    title: str
    kind: str  # the document's format (markdown, text, pdf, ...)
    status: str
    source: str | None
    revision_id: str
    revision_number: int
    content: str
    total_chars: int
    created_at: str
    is_current: bool
    sha256: str


@dataclass(frozen=True)
class RevisionRow:
    revision_id: str
    number: int
    created_at: str
    sha256: str
    is_current: bool


@dataclass(frozen=True)
class ChunkRow:
    """A chunk with what a fetch shows of its revision, document and store."""

    chunk_id: str
    document_id: str
    knowledge_base_id: str
    revision_id: str
    path: str
    title: str
    heading_path: str  # JSON text: the list of headings
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    text: str
    is_current: bool
    document_kind: str  # the document's format
    sha256: str  # the revision's
    store_kind: str  # knowledge_base.kind: 'documents' or 'memories'
    revision_chars: int
    knowledge_base_name: str
    covers_whole: bool  # only blanks of the revision lie outside the chunk


class Reads(Protocol):
    def document_revision(
        self,
        conn: Connection,
        document_id: str,
        revision_id: str | None,
        readable_ids: Sequence[int],
    ) -> DocumentRevision | None:
        """The revision `revision_id` (None: the current one) of the document (or memory)
        `document_id`, if it lies in one of `readable_ids`; a forgotten memory is not returned,
        an archived document is."""
        ...

    def revisions(self, conn: Connection, document_row_id: int, limit: int) -> list[RevisionRow]:
        """The document's revisions, newest first, at most `limit`."""
        ...

    def resolve_knowledge_base_ids(
        self, conn: Connection, knowledge_base_ids: Sequence[str], readable_ids: Sequence[int]
    ) -> list[tuple[str, int | None]]:
        """Each requested public id, in the order given, with its row id, or None when it is
        unknown or not among `readable_ids`."""
        ...

    def chunks(
        self, conn: Connection, chunk_ids: Sequence[str], readable_ids: Sequence[int]
    ) -> list[ChunkRow]:
        """The chunks with these public ids that lie in `readable_ids` (in no set order);
        archived documents' chunks are returned, forgotten memories' are not."""
        ...


class SqlReads:
    """The reads concern (the `Reads` Protocol) over a backend's statements: a backend subclasses
    it with its statements (the upper-case class attributes, named parameters; id lists one
    parameter each) and its dialect. Truth values are read with bool(): SQLite's are 0 and 1."""

    dialect: ClassVar[Dialect]

    SELECT_DOCUMENT_REVISION: ClassVar[str]
    SELECT_REVISIONS: ClassVar[str]
    RESOLVE_KNOWLEDGE_BASE_IDS: ClassVar[str]
    SELECT_CHUNKS: ClassVar[str]

    def document_revision(
        self,
        conn: Connection,
        document_id: str,
        revision_id: str | None,
        readable_ids: Sequence[int],
    ) -> DocumentRevision | None:
        found = conn.execute(
            self.SELECT_DOCUMENT_REVISION,
            {
                "document_id": document_id,
                "revision_id": revision_id,
                "readable_kb_ids": self.dialect.list_param(readable_ids),
            },
        ).fetchone()
        if found is None:
            return None
        return DocumentRevision(*found[:16], bool(found[16]), found[17])

    def revisions(self, conn: Connection, document_row_id: int, limit: int) -> list[RevisionRow]:
        rows = conn.execute(
            self.SELECT_REVISIONS, {"document_row_id": document_row_id, "limit": limit}
        )
        return [
            RevisionRow(rev_id, number, created_at, sha256, bool(current))
            for rev_id, number, created_at, sha256, current in rows
        ]

    def resolve_knowledge_base_ids(
        self, conn: Connection, knowledge_base_ids: Sequence[str], readable_ids: Sequence[int]
    ) -> list[tuple[str, int | None]]:
        rows = conn.execute(
            self.RESOLVE_KNOWLEDGE_BASE_IDS,
            {
                "knowledge_base_ids": self.dialect.list_param(knowledge_base_ids),
                "readable_kb_ids": self.dialect.list_param(readable_ids),
            },
        )
        return [(public_id, row_id) for public_id, row_id in rows]

    def chunks(
        self, conn: Connection, chunk_ids: Sequence[str], readable_ids: Sequence[int]
    ) -> list[ChunkRow]:
        rows = conn.execute(
            self.SELECT_CHUNKS,
            {
                "chunk_ids": self.dialect.list_param(chunk_ids),
                "readable_ids": self.dialect.list_param(readable_ids),
                "blank_slack": WHOLE_CHUNK_BLANK_SLACK,
                "blanks": BLANKS,
            },
        )
        return [
            ChunkRow(*row[:12], bool(row[12]), *row[13:18], bool(row[18]))  # type: ignore[arg-type]
            for row in rows
        ]
