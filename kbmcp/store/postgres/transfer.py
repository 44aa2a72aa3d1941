"""The transfer concern (kbmcp/store/transfer.py) on PostgreSQL."""

from __future__ import annotations

from kbmcp.store.postgres.dialect import POSTGRES
from kbmcp.store.transfer import SqlTransfer, statements

# Trap: `%(after)s IS NULL` needs a type (psycopg sends an untyped NULL); COLLATE "C" sorts
# text in byte order, as SQLite does, whatever the database's locale.
_SHARED = statements("%({})s", 'COLLATE "C"', {"after": "%(after)s::text"})

TRANSFER = SqlTransfer(
    POSTGRES,
    _SHARED
    | {
        # PostgresDialect.insert reads the new row's id from RETURNING
        "INSERT_TENANT": _SHARED["INSERT_TENANT"] + " RETURNING id",
        "INSERT_STORE": _SHARED["INSERT_STORE"] + " RETURNING id",
        # %(ids)s is an array (PostgresDialect.list_param)
        "SELECT_SHARES": """
            SELECT kb.public_id, t.name, s.shared_at, s.revoked_at
            FROM share AS s
            JOIN knowledge_base AS kb ON kb.id = s.knowledge_base_id
            JOIN tenant AS t ON t.id = s.tenant_id
            WHERE s.knowledge_base_id = ANY(%(ids)s)
            ORDER BY kb.public_id COLLATE "C", t.name COLLATE "C" """,
        "SELECT_TAKEN": "SELECT public_id FROM {table} WHERE public_id = ANY(%(ids)s)",
        # The store's rows name their store in every join and filter (migration 9): on Citus
        # each statement is then a router query on the store's shard.
        "SELECT_DOCUMENTS": """
            SELECT d.id, d.public_id, d.path, d.title, d.kind, d.source, d.metadata, d.status,
                   r.public_id, d.attributes_hash, d.created_at, d.updated_at
            FROM document AS d
            JOIN revision AS r
              ON r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id
            WHERE d.knowledge_base_id = %(store_id)s AND r.knowledge_base_id = %(store_id)s
              AND (%(after)s::text IS NULL OR d.path COLLATE "C" > %(after)s::text)
            ORDER BY d.path COLLATE "C"
            LIMIT %(limit)s""",
        "SELECT_DOCUMENT_TAGS": """
            SELECT key, value FROM document_tag
            WHERE knowledge_base_id = %(store_id)s AND document_id = %(document_id)s
            ORDER BY key COLLATE "C", value COLLATE "C" """,
        "SELECT_REVISIONS": """
            SELECT r.id, r.public_id, r.number, r.content, r.content_hash, r.char_count,
                   r.line_count, r.created_at
            FROM revision AS r
            WHERE r.knowledge_base_id = %(store_id)s AND r.document_id = %(document_id)s
              AND NOT EXISTS (SELECT 1 FROM staged_revision AS s
                              WHERE s.knowledge_base_id = %(store_id)s
                                AND s.revision_id = r.id)
            ORDER BY r.number""",
        "SELECT_CHUNKS": """
            SELECT public_id, ordinal, heading_path, char_start, char_end, line_start, line_end,
                   text
            FROM chunk
            WHERE knowledge_base_id = %(store_id)s AND revision_id = %(revision_id)s
            ORDER BY ordinal""",
        "SELECT_STORED_VECTORS": """
            SELECT c.public_id, v.embedding
            FROM chunk AS c
            JOIN chunk_vector AS v
              ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
            WHERE c.knowledge_base_id = %(store_id)s AND v.knowledge_base_id = %(store_id)s
              AND c.revision_id = %(revision_id)s
            ORDER BY c.ordinal""",
    },
)
