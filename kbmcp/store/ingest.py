"""The ingest concern of the store contract: the state `kbmcp add` and `kbmcp watch` keep between
runs, beside the documents themselves (kbmcp/store/catalog.py writes those).

- the file each document was last read from (`source_file`: SQLite migration 9, PostgreSQL 2),
  so an unchanged file is found by its signature without being opened (docs/ingest.md);
- revisions written in parts (`staged_revision`: SQLite migration 10, PostgreSQL 2): a document
  too large for one short write transaction gets its chunks and vectors over several, then one
  short transaction makes the revision current (kbmcp/service/ingest_write.py `StagedWrite`);
- documents moved under a folder added around the one they came from (the add-order rule,
  kbmcp/service/ingest_places.py), and the document reads of archiving.

Implemented by kbmcp/store/sqlite/ingest.py and kbmcp/store/postgres/ingest.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection
    from kbmcp.store.catalog import NewDocument

# A file whose mtime lies within this of the moment its signature was taken could change again
# with the same size and mtime (coarse timestamps: FAT has 2 s, ext3 and HFS+ 1 s).
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class FileSignature:
    """What the file system says about a file, cheaply (one stat)."""

    size: int
    mtime_ns: int
    inode: int
    checked_ns: int  # when it was taken (time.time_ns(), before the stat)

    def same_file_as(self, other: FileSignature) -> bool:
        return (self.size, self.mtime_ns, self.inode) == (other.size, other.mtime_ns, other.inode)

    @property
    def trusted(self) -> bool:
        """Whether a later write to the file must change its size or mtime: it was not modified
        within a timestamp granularity of the moment it was taken."""
        return self.mtime_ns + RACY_NS <= self.checked_ns


@dataclass(frozen=True)
class RecordedFile:
    """The source_file row of a document: the signature, bytes hash and read key it was last
    read (or found unchanged) with."""

    signature: FileSignature
    bytes_hash: str
    read_key: str
    folder: str | None = None  # the folder it was added from; '': named directly; None: unknown


@dataclass(frozen=True)
class FileRefresh:
    """A file found unchanged: the document at `path` holds `content_hash`, read from `file`."""

    path: str
    file: RecordedFile
    content_hash: str


@dataclass(frozen=True)
class StagedRevision:
    """A revision being written in parts, with what decides whether a run may resume it."""

    revision_id: int
    public_id: str
    content_hash: str
    chunking: str  # the chunking signature (JSON) its chunks were cut with


@dataclass(frozen=True)
class StagedChunk:
    ordinal: int
    char_start: int
    char_end: int
    heading_path: str  # JSON, as stored
    has_vector: bool


class Ingest(Protocol):
    # ---------------------------------------------------------------- source files

    def recorded_files(self, conn: Connection, knowledge_base_id: int) -> dict[str, RecordedFile]:
        """The recorded file of each document of the knowledge base that has one, by path."""
        ...

    def record_file(
        self, conn: Connection, document_id: int, recorded: RecordedFile | None
    ) -> None:
        """Record the file a document was just written from (None: it was written from text,
        and has no file)."""
        ...

    def refresh_files(
        self, conn: Connection, knowledge_base_id: int, files: Iterable[FileRefresh]
    ) -> None:
        """Record files found unchanged, each only while the document at its path is
        published with the content the file was found to hold (another writer may have
        changed it since)."""
        ...

    # ---------------------------------------------------------------- moves and archiving

    def move_document(
        self, conn: Connection, document_id: int, old_path: str, new_path: str
    ) -> bool:
        """Give a document another path if it still has `old_path` (False: another writer
        moved it meanwhile). A path another document holds is a constraint violation
        (`store.is_constraint_violation`)."""
        ...

    def move_source_file(self, conn: Connection, document_id: int, folder: str | None) -> None:
        """The folder a moved document's file now counts as added from."""
        ...

    def archivable_document(
        self, conn: Connection, public_id: str, readable_kb_ids: Sequence[int]
    ) -> int | None:
        """The row id of the published document with this public id in one of the knowledge
        bases, if any."""
        ...

    def current_revision_for_update(self, conn: Connection, document_id: int) -> int | None:
        """The document's current revision (inside a write transaction; PostgreSQL locks the
        document until it ends, so no other writer changes it between this read and the
        caller's writes)."""
        ...

    # ---------------------------------------------------------------- revisions in parts

    def insert_staged_document(
        self, conn: Connection, document: NewDocument, now: str
    ) -> int | None:
        """A new document whose first revision is being written in parts: archived (in no
        listing of published documents, in no index) until the switch publishes it. None when
        another writer added the path (or took the public id) meanwhile, as
        `catalog.insert_document`."""
        ...

    def add_staged(
        self, conn: Connection, revision_id: int, document_id: int, chunking: str, now: str
    ) -> None:
        """List a revision as being written in parts."""
        ...

    def touch_staged(self, conn: Connection, revision_id: int, now: str) -> None:
        """A part was written now (revisions no run came back for are dropped later)."""
        ...

    def remove_staged(self, conn: Connection, revision_id: int) -> None:
        """The revision is complete (switched): no longer listed."""
        ...

    def staged_revisions(self, conn: Connection, document_id: int) -> list[StagedRevision]:
        """The document's revisions being written in parts, newest first."""
        ...

    def staged_chunks(self, conn: Connection, revision_id: int) -> list[StagedChunk]:
        """The chunks written so far, by ordinal, with whether each has its vector (a
        `kbmcp reembed` in between drops every stored vector)."""
        ...

    def chunks_and_vectors(self, conn: Connection, revision_id: int) -> tuple[int, int]:
        """How many chunks a revision has, and how many of them have a stored vector."""
        ...

    def stale_staged(self, conn: Connection, knowledge_base_id: int, before: str) -> list[int]:
        """The knowledge base's staged revisions no run has written to since `before`."""
        ...

    def delete_chunks_part(self, conn: Connection, revision_id: int, limit: int) -> int:
        """Delete up to `limit` chunks of a revision (with their stored vectors); returns how
        many were deleted."""
        ...

    def delete_revision(self, conn: Connection, revision_id: int) -> None:
        """Delete a revision without chunks (its staged_revision row goes with it)."""
        ...

    def drop_vectors_part(self, conn: Connection, revision_id: int, limit: int) -> int:
        """Delete up to `limit` stored vectors of a revision that is no longer current;
        returns how many were deleted."""
        ...
