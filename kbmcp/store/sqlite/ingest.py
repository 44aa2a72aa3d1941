"""The ingest concern (kbmcp/store/ingest.py) on SQLite: recorded source files (migration 9),
revisions written in parts (migration 10), moves and the document reads of archiving.

A revision written in parts gets its chunks and vectors over several short transactions; the
last one moves the search indexes from the old revision's chunks to the new one's with set-based
statements (kbmcp/store/sqlite/index.py `index_revision`) and makes it current. Every write
here runs inside a BEGIN IMMEDIATE transaction, so what a statement reads cannot change before
the transaction's next one: SQLite has one writer at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import apsw

from kbmcp.store.catalog import NewDocument
from kbmcp.store.ingest import (
    FileRefresh,
    FileSignature,
    RecordedFile,
    StagedChunk,
    StagedRevision,
)

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
# A document moved to a path relative to another folder (the add-order rule), only if it is
# still where the run found it.
MOVE_DOCUMENT = "UPDATE document SET path = :path WHERE id = :document_id AND path = :old_path"
# A published document of a knowledge base the principal can read, by public id.
SELECT_ARCHIVABLE = """
SELECT d.id FROM document AS d
WHERE d.public_id = :document_id AND d.status = 'published'
  AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids))
"""
SELECT_CURRENT_REVISION = "SELECT current_revision_id FROM document WHERE id = :document_id"

# A new document whose first revision is being written: archived (so in no listing of published
# documents and no index) and without a current revision until the switch publishes it.
INSERT_STAGED_DOCUMENT = """
INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                      status, created_at, updated_at)
VALUES (:public_id, :kb_id, :path, :title, :kind, :source, :metadata, 'archived', :now, :now)
"""
INSERT_STAGED = """
INSERT INTO staged_revision (revision_id, document_id, chunking, updated_at)
VALUES (:revision_id, :document_id, :chunking, :now)
"""
TOUCH_STAGED = "UPDATE staged_revision SET updated_at = :now WHERE revision_id = :revision_id"
DELETE_STAGED = "DELETE FROM staged_revision WHERE revision_id = :revision_id"
# The staged revisions of a document that an interrupted run may have left: the one with the
# same content and chunking is resumed from its last written chunk.
SELECT_STAGED_OF_DOCUMENT = """
SELECT s.revision_id, r.public_id, r.content_hash, s.chunking
FROM staged_revision AS s JOIN revision AS r ON r.id = s.revision_id
WHERE s.document_id = :document_id
ORDER BY s.revision_id DESC
"""
# Written chunks of a staged revision, with whether each has its vector (a `kbmcp reembed` in
# between drops every stored vector: such a revision cannot be resumed).
SELECT_STAGED_CHUNKS = """
SELECT c.ordinal, c.char_start, c.char_end, c.heading_path, v.chunk_id IS NOT NULL
FROM chunk AS c LEFT JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
ORDER BY c.ordinal
"""
COUNT_CHUNKS_WITH_VECTORS = """
SELECT count(*), count(v.chunk_id)
FROM chunk AS c LEFT JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
"""
# Staged revisions of a knowledge base that no run has written to since :before.
SELECT_STALE_STAGED = """
SELECT s.revision_id
FROM staged_revision AS s JOIN document AS d ON d.id = s.document_id
WHERE d.knowledge_base_id = :kb_id AND s.updated_at < :before
"""
# Dropping a revision's chunks a part at a time (chunk_vector rows go with them: ON DELETE
# CASCADE), then the revision itself (its staged_revision row cascades too).
DELETE_CHUNKS_PART = """
DELETE FROM chunk WHERE id IN (
    SELECT id FROM chunk WHERE revision_id = :revision_id ORDER BY ordinal DESC LIMIT :limit)
"""
DELETE_REVISION = "DELETE FROM revision WHERE id = :revision_id"
# The stored vectors of a revision that is no longer current, a part at a time.
DELETE_VECTORS_PART = """
DELETE FROM chunk_vector WHERE chunk_id IN (
    SELECT v.chunk_id FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
    WHERE c.revision_id = :revision_id LIMIT :limit)
"""


# ------------------------------------------------------------------ source files


def recorded_files(conn: apsw.Connection, knowledge_base_id: int) -> dict[str, RecordedFile]:
    return {
        path: RecordedFile(
            FileSignature(size, mtime_ns, inode, checked_ns), bytes_hash, read_key, folder
        )
        for path, size, mtime_ns, inode, bytes_hash, read_key, folder, checked_ns in conn.execute(
            SELECT_SOURCE_FILES, {"kb_id": knowledge_base_id}
        )
    }


def record_file(conn: apsw.Connection, document_id: int, recorded: RecordedFile | None) -> None:
    if recorded is None:
        conn.execute(DELETE_SOURCE_FILE, {"document_id": document_id})
        return
    conn.execute(UPSERT_SOURCE_FILE, {"document_id": document_id, **_params(recorded)})


def refresh_files(
    conn: apsw.Connection, knowledge_base_id: int, files: Iterable[FileRefresh]
) -> None:
    """See REFRESH_SOURCE_FILE."""
    conn.executemany(
        REFRESH_SOURCE_FILE,
        [
            {
                "kb_id": knowledge_base_id,
                "path": f.path,
                "content_hash": f.content_hash,
                **_params(f.file),
            }
            for f in files
        ],
    )


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


# ------------------------------------------------------------------ moves and archiving


def move_document(conn: apsw.Connection, document_id: int, old_path: str, new_path: str) -> bool:
    conn.execute(
        MOVE_DOCUMENT, {"path": new_path, "old_path": old_path, "document_id": document_id}
    )
    return conn.changes() == 1


def move_source_file(conn: apsw.Connection, document_id: int, folder: str | None) -> None:
    conn.execute(MOVE_SOURCE_FILE, {"folder": folder, "document_id": document_id})


def archivable_document(
    conn: apsw.Connection, public_id: str, readable_kb_ids: Sequence[int]
) -> int | None:
    row = conn.execute(
        SELECT_ARCHIVABLE,
        {"document_id": public_id, "readable_kb_ids": json.dumps(list(readable_kb_ids))},
    ).fetchone()
    return None if row is None else int(row[0])


def current_revision_for_update(conn: apsw.Connection, document_id: int) -> int | None:
    return conn.execute(SELECT_CURRENT_REVISION, {"document_id": document_id}).fetchone()[0]


# ------------------------------------------------------------------ revisions in parts


def insert_staged_document(conn: apsw.Connection, document: NewDocument, now: str) -> int | None:
    conn.execute(INSERT_STAGED_DOCUMENT, document.parameters(now))
    return conn.last_insert_rowid()


def add_staged(
    conn: apsw.Connection, revision_id: int, document_id: int, chunking: str, now: str
) -> None:
    conn.execute(
        INSERT_STAGED,
        {"revision_id": revision_id, "document_id": document_id, "chunking": chunking, "now": now},
    )


def touch_staged(conn: apsw.Connection, revision_id: int, now: str) -> None:
    conn.execute(TOUCH_STAGED, {"revision_id": revision_id, "now": now})


def remove_staged(conn: apsw.Connection, revision_id: int) -> None:
    conn.execute(DELETE_STAGED, {"revision_id": revision_id})


def staged_revisions(conn: apsw.Connection, document_id: int) -> list[StagedRevision]:
    return [
        StagedRevision(*row)
        for row in conn.execute(SELECT_STAGED_OF_DOCUMENT, {"document_id": document_id})
    ]


def staged_chunks(conn: apsw.Connection, revision_id: int) -> list[StagedChunk]:
    return [
        StagedChunk(ordinal, start, end, heading, bool(has_vector))
        for ordinal, start, end, heading, has_vector in conn.execute(
            SELECT_STAGED_CHUNKS, {"revision_id": revision_id}
        )
    ]


def chunks_and_vectors(conn: apsw.Connection, revision_id: int) -> tuple[int, int]:
    chunks, vectors = conn.execute(
        COUNT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id}
    ).fetchone()
    return int(chunks), int(vectors)


def stale_staged(conn: apsw.Connection, knowledge_base_id: int, before: str) -> list[int]:
    return [
        row[0]
        for row in conn.execute(SELECT_STALE_STAGED, {"kb_id": knowledge_base_id, "before": before})
    ]


def delete_chunks_part(conn: apsw.Connection, revision_id: int, limit: int) -> int:
    conn.execute(DELETE_CHUNKS_PART, {"revision_id": revision_id, "limit": limit})
    return conn.changes()


def delete_revision(conn: apsw.Connection, revision_id: int) -> None:
    conn.execute(DELETE_REVISION, {"revision_id": revision_id})


def drop_vectors_part(conn: apsw.Connection, revision_id: int, limit: int) -> int:
    conn.execute(DELETE_VECTORS_PART, {"revision_id": revision_id, "limit": limit})
    return conn.changes()
