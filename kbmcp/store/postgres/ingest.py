"""The ingest concern (kbmcp/store/ingest.py) on PostgreSQL: recorded source files and revisions
written in parts (migration 2), moves and the document reads of archiving; the statements of
`SqlIngest`.

The statements are SQLite's (kbmcp/store/sqlite/ingest.py) with these differences:
- several servers (or a server and a CLI) may write at once, where SQLite has one writer: the
  reads a write depends on lock what they read (`FOR UPDATE`), and an insert that may race
  with another writer's says what happens on a conflict (`ON CONFLICT`), each noted below;
- lists of ids are arrays (`= ANY(...)`), new row ids come back from `RETURNING id`, and
  deleted rows are counted by the cursor.
"""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.store.ingest import SqlIngest
from kbmcp.store.postgres.dialect import POSTGRES

PgConnection = psycopg.Connection[Any]


class PostgresIngest(SqlIngest):
    dialect = POSTGRES
    SELECT_SOURCE_FILES = """
    SELECT d.path, f.size, f.mtime_ns, f.inode, f.bytes_hash, f.read_key, f.folder, f.checked_ns
    FROM source_file AS f
    JOIN document AS d ON d.knowledge_base_id = f.knowledge_base_id AND d.id = f.document_id
    WHERE d.knowledge_base_id = %(kb_id)s
    """
    # The row is in its document's store (migration 9), read from the document.
    UPSERT_SOURCE_FILE = """
    INSERT INTO source_file (document_id, size, mtime_ns, inode, bytes_hash, read_key, folder,
                             checked_ns, knowledge_base_id)
    SELECT d.id, %(size)s, %(mtime_ns)s, %(inode)s, %(bytes_hash)s, %(read_key)s, %(folder)s,
           %(checked_ns)s, d.knowledge_base_id
    FROM document AS d WHERE d.id = %(document_id)s
    ON CONFLICT (document_id, knowledge_base_id) DO UPDATE SET
        size = excluded.size, mtime_ns = excluded.mtime_ns, inode = excluded.inode,
        bytes_hash = excluded.bytes_hash, read_key = excluded.read_key, folder = excluded.folder,
        checked_ns = excluded.checked_ns
    """
    # Multi-writer: FOR UPDATE OF d locks the document, so a write of it by another server that is
    # in progress is waited for and the row is then checked again (READ COMMITTED re-evaluates the
    # WHERE on the latest version): a file is never recorded for content its document no longer
    # holds.
    REFRESH_SOURCE_FILE = """
    INSERT INTO source_file (document_id, size, mtime_ns, inode, bytes_hash, read_key, folder,
                             checked_ns, knowledge_base_id)
    SELECT d.id, %(size)s, %(mtime_ns)s, %(inode)s, %(bytes_hash)s, %(read_key)s, %(folder)s,
           %(checked_ns)s, d.knowledge_base_id
    FROM document AS d
    JOIN revision AS r ON r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id
    WHERE d.knowledge_base_id = %(kb_id)s AND d.path = %(path)s AND d.status = 'published'
      AND r.content_hash = %(content_hash)s
    FOR UPDATE OF d
    ON CONFLICT (document_id, knowledge_base_id) DO UPDATE SET
        size = excluded.size, mtime_ns = excluded.mtime_ns, inode = excluded.inode,
        bytes_hash = excluded.bytes_hash, read_key = excluded.read_key, folder = excluded.folder,
        checked_ns = excluded.checked_ns
    """
    MOVE_SOURCE_FILE = """
    UPDATE source_file SET folder = %(folder)s WHERE document_id = %(document_id)s
    """
    DELETE_SOURCE_FILE = "DELETE FROM source_file WHERE document_id = %(document_id)s"
    # Multi-writer: the UPDATE locks the row and, after waiting for another server's write of it,
    # checks `path = old_path` again on the latest version (READ COMMITTED): 0 rows when it was
    # moved meanwhile. A path another document took meanwhile fails the UNIQUE (knowledge base,
    # path) constraint.
    MOVE_DOCUMENT = """
    UPDATE document SET path = %(path)s WHERE id = %(document_id)s AND path = %(old_path)s
    """
    SELECT_ARCHIVABLE = """
    SELECT d.id FROM document AS d
    WHERE d.public_id = %(document_id)s AND d.status = 'published'
      AND d.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
    """
    # Multi-writer: FOR UPDATE holds the document until the archiving transaction ends, so another
    # server cannot give it a new revision between this read and the chunks taken out of the index.
    # Citus locks rows (FOR UPDATE) only in a statement routed to one shard: the document's store
    # is read first, and the lock is taken in its store.
    SELECT_DOCUMENT_STORE = "SELECT knowledge_base_id FROM document WHERE id = %(document_id)s"
    SELECT_CURRENT_REVISION = """
    SELECT current_revision_id FROM document
    WHERE id = %(document_id)s AND knowledge_base_id = %(kb_id)s
    FOR UPDATE
    """

    # Multi-writer: two servers starting the same new document at once both find no row at its
    # path; the second insert waits for the first's transaction, then does nothing (None): the
    # caller reads the document again and continues as with an existing one.
    INSERT_STAGED_DOCUMENT = """
    INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                          status, created_at, updated_at)
    VALUES (%(public_id)s, %(kb_id)s, %(path)s, %(title)s, %(kind)s, %(source)s, %(metadata)s,
            'archived', %(now)s, %(now)s)
    ON CONFLICT DO NOTHING
    RETURNING id
    """
    INSERT_STAGED = """
    INSERT INTO staged_revision (revision_id, document_id, chunking, updated_at, knowledge_base_id)
    SELECT r.id, r.document_id, %(chunking)s, %(now)s, r.knowledge_base_id
    FROM revision AS r WHERE r.id = %(revision_id)s AND r.document_id = %(document_id)s
    """
    TOUCH_STAGED = """
    UPDATE staged_revision SET updated_at = %(now)s WHERE revision_id = %(revision_id)s
    """
    DELETE_STAGED = "DELETE FROM staged_revision WHERE revision_id = %(revision_id)s"
    SELECT_STAGED_OF_DOCUMENT = """
    SELECT s.revision_id, r.public_id, r.content_hash, s.chunking
    FROM staged_revision AS s
    JOIN revision AS r ON r.knowledge_base_id = s.knowledge_base_id AND r.id = s.revision_id
    WHERE s.document_id = %(document_id)s
    ORDER BY s.revision_id DESC
    """
    SELECT_STAGED_CHUNKS = """
    SELECT c.ordinal, c.char_start, c.char_end, c.heading_path, v.chunk_id IS NOT NULL
    FROM chunk AS c
    LEFT JOIN chunk_vector AS v ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
    WHERE c.revision_id = %(revision_id)s
    ORDER BY c.ordinal
    """
    COUNT_CHUNKS_WITH_VECTORS = """
    SELECT count(*), count(v.chunk_id)
    FROM chunk AS c
    LEFT JOIN chunk_vector AS v ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
    WHERE c.revision_id = %(revision_id)s
    """
    SELECT_STALE_STAGED = """
    SELECT s.revision_id
    FROM staged_revision AS s
    WHERE s.knowledge_base_id = %(kb_id)s AND s.updated_at < %(before)s
    """
    # Chunks go with their stored vectors (ON DELETE CASCADE), a revision with its staged row.
    DELETE_CHUNKS_PART = """
    DELETE FROM chunk WHERE (id, knowledge_base_id) IN (
        SELECT id, knowledge_base_id FROM chunk WHERE revision_id = %(revision_id)s
        ORDER BY ordinal DESC LIMIT %(limit)s)
    """
    DELETE_REVISION = "DELETE FROM revision WHERE id = %(revision_id)s"
    DELETE_VECTORS_PART = """
    DELETE FROM chunk_vector WHERE (chunk_id, knowledge_base_id) IN (
        SELECT v.chunk_id, v.knowledge_base_id
        FROM chunk AS c
        JOIN chunk_vector AS v ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
        WHERE c.revision_id = %(revision_id)s LIMIT %(limit)s)
    """

    def current_revision_for_update(self, conn: PgConnection, document_id: int) -> int | None:
        found = conn.execute(self.SELECT_DOCUMENT_STORE, {"document_id": document_id}).fetchone()
        if found is None:
            return None
        row = conn.execute(
            self.SELECT_CURRENT_REVISION, {"document_id": document_id, "kb_id": found[0]}
        ).fetchone()
        return None if row is None else row[0]


INGEST = PostgresIngest()
