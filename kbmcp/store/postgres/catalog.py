"""The catalog concern (kbmcp/store/catalog.py) on PostgreSQL: tenants, knowledge bases, and the
document, revision, chunk and tag rows ingest writes. The logic is `SqlCatalog`'s.

The statements are SQLite's (kbmcp/store/sqlite/catalog.py) with these differences:
- new rows' ids come back from `RETURNING id`;
- inserts that may race with another server's use `ON CONFLICT DO NOTHING` on every unique
  constraint (a tenant's public id and name are both unique, and made from the name);
- the document a write is about is locked (`FOR UPDATE OF d`) until its transaction ends, so
  two servers writing one path take turns instead of both inserting a revision;
- text is ordered byte by byte (`COLLATE "C"`, SQLite's BINARY), whatever the database's
  collation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from kbmcp.errors import StoreError
from kbmcp.store.catalog import ChunkWithVector, NewChunk, SqlCatalog, chunk_parameters
from kbmcp.store.postgres.dialect import POSTGRES
from kbmcp.store.postgres.id_key import ID_KEYS

PgConnection = psycopg.Connection[Any]


class PostgresCatalog(SqlCatalog):
    dialect = POSTGRES
    id_keys = ID_KEYS

    INSERT_TENANT = """
    INSERT INTO tenant (public_id, name, created_at) VALUES (%(public_id)s, %(name)s, %(now)s)
    ON CONFLICT DO NOTHING
    """
    SELECT_TENANT = "SELECT id, public_id FROM tenant WHERE name = %(name)s"
    SELECT_TENANT_BY_REF = """
    SELECT id, public_id, name FROM tenant WHERE name = %(ref)s OR public_id = %(ref)s
    """

    INSERT_KB = """
    INSERT INTO knowledge_base (public_id, tenant_id, name, description, kind, tags, created_at,
                                updated_at)
    VALUES (%(public_id)s, %(tenant_id)s, %(name)s, %(description)s, %(kind)s, %(tags)s, %(now)s,
            %(now)s)
    ON CONFLICT DO NOTHING
    """
    SELECT_KB_BY_NAME = """
    SELECT id, public_id, kind FROM knowledge_base
    WHERE tenant_id = %(tenant_id)s AND name = %(name)s
    """
    SELECT_KB_BY_PUBLIC_ID = """
    SELECT id, public_id, name, kind FROM knowledge_base
    WHERE tenant_id = %(tenant_id)s AND public_id = %(public_id)s
    """
    SELECT_KBS_BY_REF = """
    SELECT kb.id, kb.public_id, kb.name, t.id, t.public_id, t.name
    FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id
    WHERE (kb.public_id = %(ref)s OR kb.name = %(ref)s) AND kb.kind = 'documents'
    ORDER BY t.name COLLATE "C", kb.public_id COLLATE "C"
    """

    SELECT_DOCUMENT_STATES = """
    SELECT d.id, d.public_id, d.path, d.title, d.status, d.source, d.attributes_hash,
           r.id, r.content_hash
    FROM document AS d
    LEFT JOIN revision AS r
           ON r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id
    WHERE d.knowledge_base_id = %(kb_id)s
    """
    # Multi-writer: two servers adding one path at once both found no document there; the second
    # insert waits for the first's transaction, then does nothing (None), and ingest reads the
    # document again. Any unique constraint counts (path, or the public id made from it).
    INSERT_DOCUMENT = """
    INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                          status, created_at, updated_at)
    VALUES (%(public_id)s, %(kb_id)s, %(path)s, %(title)s, %(kind)s, %(source)s, %(metadata)s,
            'published', %(now)s, %(now)s)
    ON CONFLICT DO NOTHING
    RETURNING id
    """
    # FOR UPDATE OF d: the document row only (the revision is on the nullable side of the join).
    SELECT_DOCUMENT_FOR_UPDATE = """
    SELECT d.id, d.public_id, d.status, d.current_revision_id, r.content_hash, d.attributes_hash,
           d.source
    FROM document AS d
    LEFT JOIN revision AS r
           ON r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id
    WHERE d.knowledge_base_id = %(kb_id)s AND d.path = %(path)s
    FOR UPDATE OF d
    """
    DOCUMENT_ID_TAKEN = "SELECT 1 FROM document WHERE public_id = %(public_id)s"
    NEXT_REVISION_NUMBER = """
    SELECT COALESCE(MAX(number), 0) + 1 FROM revision WHERE document_id = %(document_id)s
    """
    UPDATE_DOCUMENT = """
    UPDATE document
    SET title = %(title)s, kind = %(kind)s, source = %(source)s, metadata = %(metadata)s,
        status = 'published', current_revision_id = %(revision_id)s,
        attributes_hash = %(attributes_hash)s, updated_at = %(now)s
    WHERE id = %(document_id)s
    """
    ARCHIVE_DOCUMENT = """
    UPDATE document SET status = 'archived', updated_at = %(now)s WHERE id = %(document_id)s
    """
    DELETE_TAGS = "DELETE FROM document_tag WHERE document_id = %(document_id)s"
    INSERT_TAG = """
    INSERT INTO document_tag (document_id, key, value, knowledge_base_id)
    SELECT %(document_id)s, %(key)s, %(value)s, d.knowledge_base_id
    FROM document AS d WHERE d.id = %(document_id)s
    ON CONFLICT DO NOTHING
    """
    # A revision and a chunk are in their document's store (migration 9): it is read from the
    # row they belong to, so a caller names the document or revision only. On Citus the row's
    # store is then found by asking every shard (an index probe each) and the insert is routed
    # to the store's shard; the new id comes from the coordinator's sequence.
    INSERT_REVISION = """
    INSERT INTO revision (public_id, document_id, number, content, content_hash, char_count,
                          line_count, created_at, knowledge_base_id)
    SELECT %(public_id)s, d.id, %(number)s, %(content)s, %(content_hash)s, %(char_count)s,
           %(line_count)s, %(now)s, d.knowledge_base_id
    FROM document AS d WHERE d.id = %(document_id)s
    RETURNING id
    """
    # A revision's chunks name its store, read once for all of them (REVISION_STORE): on Citus
    # the inserts then go to the store's shard, where reading the store per chunk would ask
    # every shard once a chunk.
    REVISION_STORE = "SELECT knowledge_base_id FROM revision WHERE id = %(revision_id)s"
    # A revision's chunks in one statement (`insert_chunks`): the range trigger (migration 8)
    # then counts the revision once, where a statement per chunk ran it, and planned it
    # (migration 11), once per chunk. Ids are drawn in the rows' order (ORDER BY the list's
    # position), so a revision's chunks get ascending ids in ordinal order, as one by one.
    INSERT_CHUNKS = """
    INSERT INTO chunk (public_id, revision_id, ordinal, heading_path, char_start, char_end,
                       line_start, line_end, text, knowledge_base_id)
    SELECT c.public_id, %(revision_id)s, c.ordinal, c.heading_path::json, c.char_start,
           c.char_end, c.line_start, c.line_end, c.text, %(kb_id)s
    FROM unnest(%(public_ids)s::text[], %(ordinals)s::integer[], %(heading_paths)s::text[],
                %(char_starts)s::integer[], %(char_ends)s::integer[],
                %(line_starts)s::integer[], %(line_ends)s::integer[], %(texts)s::text[])
         WITH ORDINALITY
         AS c(public_id, ordinal, heading_path, char_start, char_end, line_start, line_end,
              text, position)
    ORDER BY c.position
    RETURNING id, ordinal
    """
    CHUNK_ARRAYS = ("public_id", "ordinal", "heading_path", "char_start", "char_end",
                    "line_start", "line_end", "text")  # fmt: skip
    SELECT_STORED_CHUNKS = """
    SELECT id, ordinal, heading_path, char_start, char_end, line_start, line_end, text
    FROM chunk WHERE revision_id = %(revision_id)s ORDER BY ordinal
    """
    SELECT_CHUNKS_WITH_VECTORS = """
    SELECT c.heading_path, c.text, v.embedding
    FROM chunk AS c
    JOIN chunk_vector AS v ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
    WHERE c.revision_id = %(revision_id)s
    """

    def insert_chunks(
        self, conn: PgConnection, revision_id: int, chunks: Sequence[NewChunk]
    ) -> list[int]:
        """The chunks' ids, in the order given: one statement for all of them
        (INSERT_CHUNKS)."""
        if not chunks:
            return []
        store = conn.execute(self.REVISION_STORE, {"revision_id": revision_id}).fetchone()
        if store is None:
            raise StoreError(f"revision {revision_id} does not exist: its chunks cannot be written")
        rows = chunk_parameters(revision_id, chunks)
        # Each column's values as one array parameter, named as the column with an "s".
        params = {f"{column}s": [row[column] for row in rows] for column in self.CHUNK_ARRAYS}
        params |= {"revision_id": revision_id, "kb_id": store[0]}
        ids = dict((ordinal, chunk_id) for chunk_id, ordinal in conn.execute(
            self.INSERT_CHUNKS, params).fetchall())  # fmt: skip
        return [int(ids[chunk.ordinal]) for chunk in chunks]

    def chunks_with_vectors(self, conn: PgConnection, revision_id: int) -> list[ChunkWithVector]:
        with conn.cursor(binary=True) as cur:
            rows = cur.execute(
                self.SELECT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id}
            ).fetchall()
        return [
            ChunkWithVector(heading, text, bytes(embedding)) for heading, text, embedding in rows
        ]


CATALOG = PostgresCatalog()
