"""The ingest concern of the store contract: the state `kbmcp add` and `kbmcp watch` keep between
runs, beside the documents themselves (kbmcp/store/catalog.py writes those).

- the file each document was last read from (`source_file`: SQLite migration 9, PostgreSQL 2),
  so an unchanged file is found by its signature without being opened (docs/ingest.md);
- revisions written in parts (`staged_revision`: SQLite migration 10, PostgreSQL 2): a document
  too large for one short write transaction gets its chunks and vectors over several, then one
  short transaction makes the revision current (kbmcp/service/ingest_write.py `StagedWrite`);
- documents moved under a folder added around the one they came from (the add-order rule,
  kbmcp/service/ingest_places.py), and the document reads of archiving.

Implemented by kbmcp/store/sqlite/ingest.py and kbmcp/store/postgres/ingest.py: their statements
under `SqlIngest`, the logic both share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.store.catalog import NewDocument
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect

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


class SqlIngest:
    """The ingest concern (the `Ingest` Protocol) over a backend's statements: a backend
    subclasses it with its statements (the upper-case class attributes, named parameters) and its
    dialect."""

    dialect: ClassVar[Dialect]

    SELECT_SOURCE_FILES: ClassVar[str]
    UPSERT_SOURCE_FILE: ClassVar[str]
    REFRESH_SOURCE_FILE: ClassVar[str]
    MOVE_SOURCE_FILE: ClassVar[str]
    DELETE_SOURCE_FILE: ClassVar[str]
    MOVE_DOCUMENT: ClassVar[str]
    SELECT_ARCHIVABLE: ClassVar[str]
    SELECT_CURRENT_REVISION: ClassVar[str]
    INSERT_STAGED_DOCUMENT: ClassVar[str]
    INSERT_STAGED: ClassVar[str]
    TOUCH_STAGED: ClassVar[str]
    DELETE_STAGED: ClassVar[str]
    SELECT_STAGED_OF_DOCUMENT: ClassVar[str]
    SELECT_STAGED_CHUNKS: ClassVar[str]
    COUNT_CHUNKS_WITH_VECTORS: ClassVar[str]
    SELECT_STALE_STAGED: ClassVar[str]
    DELETE_CHUNKS_PART: ClassVar[str]
    DELETE_REVISION: ClassVar[str]
    DELETE_VECTORS_PART: ClassVar[str]

    # ---------------------------------------------------------------- source files

    def recorded_files(self, conn: Connection, knowledge_base_id: int) -> dict[str, RecordedFile]:
        rows = conn.execute(self.SELECT_SOURCE_FILES, {"kb_id": knowledge_base_id})
        return {
            path: RecordedFile(
                FileSignature(size, mtime_ns, inode, checked_ns), bytes_hash, read_key, folder
            )
            for path, size, mtime_ns, inode, bytes_hash, read_key, folder, checked_ns in rows
        }

    def record_file(
        self, conn: Connection, document_id: int, recorded: RecordedFile | None
    ) -> None:
        if recorded is None:
            conn.execute(self.DELETE_SOURCE_FILE, {"document_id": document_id})
            return
        conn.execute(
            self.UPSERT_SOURCE_FILE, {"document_id": document_id, **_file_params(recorded)}
        )

    def refresh_files(
        self, conn: Connection, knowledge_base_id: int, files: Iterable[FileRefresh]
    ) -> None:
        """See REFRESH_SOURCE_FILE."""
        self.dialect.execute_many(
            conn,
            self.REFRESH_SOURCE_FILE,
            [
                {
                    "kb_id": knowledge_base_id,
                    "path": f.path,
                    "content_hash": f.content_hash,
                    **_file_params(f.file),
                }
                for f in files
            ],
        )

    # ---------------------------------------------------------------- moves and archiving

    def move_document(
        self, conn: Connection, document_id: int, old_path: str, new_path: str
    ) -> bool:
        changed = self.dialect.execute_count(
            conn,
            self.MOVE_DOCUMENT,
            {"path": new_path, "old_path": old_path, "document_id": document_id},
        )
        return changed == 1

    def move_source_file(self, conn: Connection, document_id: int, folder: str | None) -> None:
        conn.execute(self.MOVE_SOURCE_FILE, {"folder": folder, "document_id": document_id})

    def archivable_document(
        self, conn: Connection, public_id: str, readable_kb_ids: Sequence[int]
    ) -> int | None:
        row = conn.execute(
            self.SELECT_ARCHIVABLE,
            {"document_id": public_id, "readable_kb_ids": self.dialect.list_param(readable_kb_ids)},
        ).fetchone()
        return None if row is None else int(row[0])

    def current_revision_for_update(self, conn: Connection, document_id: int) -> int | None:
        row = conn.execute(self.SELECT_CURRENT_REVISION, {"document_id": document_id}).fetchone()
        return None if row is None else row[0]

    # ---------------------------------------------------------------- revisions in parts

    def insert_staged_document(
        self, conn: Connection, document: NewDocument, now: str
    ) -> int | None:
        return self.dialect.insert(conn, self.INSERT_STAGED_DOCUMENT, document.parameters(now))

    def add_staged(
        self, conn: Connection, revision_id: int, document_id: int, chunking: str, now: str
    ) -> None:
        conn.execute(
            self.INSERT_STAGED,
            {
                "revision_id": revision_id,
                "document_id": document_id,
                "chunking": chunking,
                "now": now,
            },
        )

    def touch_staged(self, conn: Connection, revision_id: int, now: str) -> None:
        conn.execute(self.TOUCH_STAGED, {"revision_id": revision_id, "now": now})

    def remove_staged(self, conn: Connection, revision_id: int) -> None:
        conn.execute(self.DELETE_STAGED, {"revision_id": revision_id})

    def staged_revisions(self, conn: Connection, document_id: int) -> list[StagedRevision]:
        rows = conn.execute(self.SELECT_STAGED_OF_DOCUMENT, {"document_id": document_id})
        return [StagedRevision(*row) for row in rows]

    def staged_chunks(self, conn: Connection, revision_id: int) -> list[StagedChunk]:
        return [
            StagedChunk(ordinal, start, end, heading, bool(has_vector))
            for ordinal, start, end, heading, has_vector in conn.execute(
                self.SELECT_STAGED_CHUNKS, {"revision_id": revision_id}
            )
        ]

    def chunks_and_vectors(self, conn: Connection, revision_id: int) -> tuple[int, int]:
        chunks, vectors = conn.execute(
            self.COUNT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id}
        ).fetchone()
        return int(chunks), int(vectors)

    def stale_staged(self, conn: Connection, knowledge_base_id: int, before: str) -> list[int]:
        rows = conn.execute(
            self.SELECT_STALE_STAGED, {"kb_id": knowledge_base_id, "before": before}
        )
        return [row[0] for row in rows]

    def delete_chunks_part(self, conn: Connection, revision_id: int, limit: int) -> int:
        return self.dialect.execute_count(
            conn, self.DELETE_CHUNKS_PART, {"revision_id": revision_id, "limit": limit}
        )

    def delete_revision(self, conn: Connection, revision_id: int) -> None:
        conn.execute(self.DELETE_REVISION, {"revision_id": revision_id})

    def drop_vectors_part(self, conn: Connection, revision_id: int, limit: int) -> int:
        return self.dialect.execute_count(
            conn, self.DELETE_VECTORS_PART, {"revision_id": revision_id, "limit": limit}
        )


def _file_params(recorded: RecordedFile) -> dict[str, object]:
    signature = recorded.signature
    return {
        "size": signature.size,
        "mtime_ns": signature.mtime_ns,
        "inode": signature.inode,
        "checked_ns": signature.checked_ns,
        "bytes_hash": recorded.bytes_hash,
        "read_key": recorded.read_key,
        "folder": recorded.folder,
    }
