"""The transfer concern (kbmcp/store/transfer.py) on SQLite."""

from __future__ import annotations

from kbmcp.store.sqlite.dialect import SQLITE
from kbmcp.store.transfer import SqlTransfer, statements

_SHARED = statements(":{}", "")


class SqliteTransfer(SqlTransfer):
    dialect = SQLITE
    SELECT_TENANTS = _SHARED["SELECT_TENANTS"]
    SELECT_STORES = _SHARED["SELECT_STORES"]
    SELECT_DOCUMENTS = _SHARED["SELECT_DOCUMENTS"]
    SELECT_DOCUMENT_TAGS = _SHARED["SELECT_DOCUMENT_TAGS"]
    SELECT_REVISIONS = _SHARED["SELECT_REVISIONS"]
    SELECT_CHUNKS = _SHARED["SELECT_CHUNKS"]
    SELECT_STORED_VECTORS = _SHARED["SELECT_STORED_VECTORS"]
    SELECT_STORE_EXISTS = _SHARED["SELECT_STORE_EXISTS"]
    INSERT_TENANT = _SHARED["INSERT_TENANT"]
    INSERT_STORE = _SHARED["INSERT_STORE"]
    # :ids is a JSON array (SqliteDialect.list_param)
    SELECT_SHARES = """
        SELECT kb.public_id, t.name, s.shared_at, s.revoked_at
        FROM share AS s
        JOIN knowledge_base AS kb ON kb.id = s.knowledge_base_id
        JOIN tenant AS t ON t.id = s.tenant_id
        WHERE s.knowledge_base_id IN (SELECT value FROM json_each(:ids))
        ORDER BY kb.public_id, t.name"""
    SELECT_TAKEN = """
        SELECT public_id FROM {table} WHERE public_id IN (SELECT value FROM json_each(:ids))"""


TRANSFER = SqliteTransfer()
