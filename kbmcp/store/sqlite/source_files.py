"""The file each document was last read from (migration 9): how `kbmcp add` knows a file is
unchanged without opening it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import apsw

# The recorded files of a knowledge base's documents, by document path.
SELECT_SOURCE_FILES = """
SELECT d.path, f.size, f.mtime_ns, f.inode, f.bytes_hash, f.read_key, f.folder, f.checked_ns
FROM source_file AS f JOIN document AS d ON d.id = f.document_id
WHERE d.knowledge_base_id = :kb_id
"""
UPSERT_SOURCE_FILE = """
INSERT INTO source_file (document_id, size, mtime_ns, inode, bytes_hash, read_key, folder,
                         checked_ns)
VALUES (:document_id, :size, :mtime_ns, :inode, :bytes_hash, :read_key, :folder, :checked_ns)
ON CONFLICT (document_id) DO UPDATE SET
    size = excluded.size, mtime_ns = excluded.mtime_ns, inode = excluded.inode,
    bytes_hash = excluded.bytes_hash, read_key = excluded.read_key, folder = excluded.folder,
    checked_ns = excluded.checked_ns
"""
# The row of the document at a path, for a file found unchanged (a new signature, or a first row
# for a document written before migration 9), only while that document is published with the
# content the file was found to hold: another process may have written it meanwhile.
# Trap: INSERT ... SELECT ... ON CONFLICT needs a WHERE in the SELECT, else SQLite parses the ON
# as a join constraint.
REFRESH_SOURCE_FILE = """
INSERT INTO source_file (document_id, size, mtime_ns, inode, bytes_hash, read_key, folder,
                         checked_ns)
SELECT d.id, :size, :mtime_ns, :inode, :bytes_hash, :read_key, :folder, :checked_ns
FROM document AS d JOIN revision AS r ON r.id = d.current_revision_id
WHERE d.knowledge_base_id = :kb_id AND d.path = :path AND d.status = 'published'
  AND r.content_hash = :content_hash
ON CONFLICT (document_id) DO UPDATE SET
    size = excluded.size, mtime_ns = excluded.mtime_ns, inode = excluded.inode,
    bytes_hash = excluded.bytes_hash, read_key = excluded.read_key, folder = excluded.folder,
    checked_ns = excluded.checked_ns
"""
# A document moved to a path relative to another folder (ingest_places.apply_moves).
MOVE_SOURCE_FILE = "UPDATE source_file SET folder = :folder WHERE document_id = :document_id"
DELETE_SOURCE_FILE = "DELETE FROM source_file WHERE document_id = :document_id"

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


def recorded_files(conn: apsw.Connection, kb_id: int) -> dict[str, RecordedFile]:
    return {
        path: RecordedFile(
            FileSignature(size, mtime_ns, inode, checked_ns), bytes_hash, read_key, folder
        )
        for path, size, mtime_ns, inode, bytes_hash, read_key, folder, checked_ns in conn.execute(
            SELECT_SOURCE_FILES, {"kb_id": kb_id}
        )
    }


def record_file(conn: apsw.Connection, document_id: int, recorded: RecordedFile | None) -> None:
    """Record the file a document was just written from (None: it was written from text)."""
    if recorded is None:
        conn.execute(DELETE_SOURCE_FILE, {"document_id": document_id})
        return
    conn.execute(UPSERT_SOURCE_FILE, {"document_id": document_id, **_params(recorded)})


def refresh_files(conn: apsw.Connection, kb_id: int, files: Iterable[FileRefresh]) -> None:
    """Record the files found unchanged (see REFRESH_SOURCE_FILE)."""
    conn.executemany(
        REFRESH_SOURCE_FILE,
        [
            {"kb_id": kb_id, "path": f.path, "content_hash": f.content_hash, **_params(f.file)}
            for f in files
        ],
    )


@dataclass(frozen=True)
class FileRefresh:
    """A file found unchanged: the document at `path` holds `content_hash`, read from `file`."""

    path: str
    file: RecordedFile
    content_hash: str


def _params(recorded: RecordedFile) -> dict[str, object]:
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
