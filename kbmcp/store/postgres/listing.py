"""Listing knowledge bases and documents on PostgreSQL (the contract and the logic:
kbmcp/store/listing.py): SQLite's statements with id lists as arrays and text in byte order
(`COLLATE "C"`, SQLite's BINARY) wherever it is ordered or compared, keyset cursors included."""

from __future__ import annotations

from kbmcp.store.listing import SqlListing
from kbmcp.store.postgres import scope
from kbmcp.store.postgres.dialect import POSTGRES


class PostgresListing(SqlListing):
    dialect = POSTGRES
    scope_sql = scope

    SELECT_KNOWLEDGE_BASES = """
    SELECT kb.public_id, kb.name, kb.description, kb.tags, kb.created_at, kb.updated_at,
           (SELECT count(*) FROM document AS d
            WHERE d.knowledge_base_id = kb.id AND d.status = 'published') AS documents,
           (SELECT count(*) FROM indexed_chunk AS i WHERE i.knowledge_base_id = kb.id) AS chunks
    FROM knowledge_base AS kb
    WHERE kb.id = ANY(%(readable_kb_ids)s::bigint[])
    ORDER BY kb.name COLLATE "C", kb.public_id COLLATE "C"
    """

    # The documents come from the search engine's scope SQL (kbmcp/store/postgres/scope.py).
    # Keyset pagination on (updated_at DESC, public_id), both compared and ordered as bytes: in the
    # database's locale the order (and so which documents a cursor skips) would differ from
    # SQLite's. Equality needs no collation (deterministic collations compare equal bytes only).
    # Trap: a parameter only compared with NULL has no type PostgreSQL can infer: `::text`.
    SELECT_DOCUMENTS = """
    WITH scope_document AS MATERIALIZED ({documents})
    SELECT d.public_id, kb.public_id, d.path, d.title, d.status, r.public_id, r.number,
           r.char_count, d.updated_at, d.metadata,
           ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t
                 WHERE t.knowledge_base_id = d.knowledge_base_id AND t.document_id = d.id
                 ORDER BY t.key COLLATE "C", t.value COLLATE "C")
    FROM scope_document AS s
    JOIN document AS d ON d.knowledge_base_id = s.knowledge_base_id AND d.id = s.id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    LEFT JOIN revision AS r
           ON r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id
    WHERE %(cursor_updated)s::text IS NULL
       OR d.updated_at COLLATE "C" < %(cursor_updated)s
       OR (d.updated_at = %(cursor_updated)s AND d.public_id COLLATE "C" > %(cursor_id)s)
    ORDER BY d.updated_at COLLATE "C" DESC, d.public_id COLLATE "C"
    LIMIT %(limit)s
    """


LISTING = PostgresListing()
