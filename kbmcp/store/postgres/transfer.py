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
    },
)
