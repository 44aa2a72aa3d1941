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

    # The counts are per-store aggregates joined to the knowledge bases, not subqueries
    # correlated with them: on Citus, knowledge_base is a reference table and the counted
    # tables are distributed, and Citus plans an aggregate grouped by the store on the shards
    # but not a subquery correlated with a reference table's row.
    SELECT_KNOWLEDGE_BASES = """
    SELECT kb.public_id, kb.name, kb.description, kb.tags, kb.created_at, kb.updated_at,
           coalesce(d.documents, 0), coalesce(i.chunks, 0)
    FROM knowledge_base AS kb
    LEFT JOIN (SELECT knowledge_base_id, count(*) AS documents FROM document
               WHERE status = 'published'
                 AND knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
               GROUP BY knowledge_base_id) AS d ON d.knowledge_base_id = kb.id
    LEFT JOIN (SELECT knowledge_base_id, count(*) AS chunks FROM indexed_chunk
               WHERE knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
               GROUP BY knowledge_base_id) AS i ON i.knowledge_base_id = kb.id
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
