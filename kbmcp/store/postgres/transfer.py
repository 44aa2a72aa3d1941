"""The transfer concern (kbmcp/store/transfer.py) on PostgreSQL."""

from __future__ import annotations

from kbmcp.store.postgres.dialect import POSTGRES
from kbmcp.store.transfer import SqlTransfer, statements

# Trap: `%(after)s IS NULL` needs a type (psycopg sends an untyped NULL); COLLATE "C" sorts
# text in byte order, as SQLite does, whatever the database's locale.
_SHARED = statements("%({})s", 'COLLATE "C"', {"after": "%(after)s::text"})


class PostgresTransfer(SqlTransfer):
    dialect = POSTGRES
    SELECT_TENANTS = _SHARED["SELECT_TENANTS"]
    SELECT_STORES = _SHARED["SELECT_STORES"]
    SELECT_DOCUMENTS = _SHARED["SELECT_DOCUMENTS"]
    SELECT_DOCUMENT_TAGS = _SHARED["SELECT_DOCUMENT_TAGS"]
    SELECT_REVISIONS = _SHARED["SELECT_REVISIONS"]
    SELECT_CHUNKS = _SHARED["SELECT_CHUNKS"]
    SELECT_STORED_VECTORS = _SHARED["SELECT_STORED_VECTORS"]
    SELECT_STORE_EXISTS = _SHARED["SELECT_STORE_EXISTS"]
    # PostgresDialect.insert reads the new row's id from RETURNING
    INSERT_TENANT = _SHARED["INSERT_TENANT"] + " RETURNING id"
    INSERT_STORE = _SHARED["INSERT_STORE"] + " RETURNING id"
    # %(ids)s is an array (PostgresDialect.list_param)
    SELECT_SHARES = """
        SELECT kb.public_id, t.name, s.shared_at, s.revoked_at
        FROM share AS s
        JOIN knowledge_base AS kb ON kb.id = s.knowledge_base_id
        JOIN tenant AS t ON t.id = s.tenant_id
        WHERE s.knowledge_base_id = ANY(%(ids)s)
        ORDER BY kb.public_id COLLATE "C", t.name COLLATE "C" """
    SELECT_TAKEN = "SELECT public_id FROM {table} WHERE public_id = ANY(%(ids)s)"


TRANSFER = PostgresTransfer()
