"""The ingest concern (kbmcp/store/ingest.py) on SQLite: recorded source files (migration 9),
revisions written in parts (migration 10), moves and the document reads of archiving; the
statements of `SqlIngest`.

A revision written in parts gets its chunks and vectors over several short transactions; the
last one moves the search indexes from the old revision's chunks to the new one's with set-based
statements (kbmcp/store/sqlite/index.py `index_revision`) and makes it current. Every write
here runs inside a BEGIN IMMEDIATE transaction, so what a statement reads cannot change before
the transaction's next one: SQLite has one writer at a time.
"""

from __future__ import annotations

from kbmcp.store.ingest import SqlIngest
from kbmcp.store.sqlite.dialect import SQLITE


class SqliteIngest(SqlIngest):
    dialect = SQLITE
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


INGEST = SqliteIngest()
