"""The transfer concern (kbmcp/store/transfer.py) on SQLite."""

from __future__ import annotations

from kbmcp.store.sqlite.dialect import SQLITE
from kbmcp.store.transfer import SqlTransfer, statements

TRANSFER = SqlTransfer(
    SQLITE,
    statements(":{}", "")
    | {
        # :ids is a JSON array (SqliteDialect.list_param)
        "SELECT_SHARES": """
            SELECT kb.public_id, t.name, s.shared_at, s.revoked_at
            FROM share AS s
            JOIN knowledge_base AS kb ON kb.id = s.knowledge_base_id
            JOIN tenant AS t ON t.id = s.tenant_id
            WHERE s.knowledge_base_id IN (SELECT value FROM json_each(:ids))
            ORDER BY kb.public_id, t.name""",
        "SELECT_TAKEN": """
            SELECT public_id FROM {table}
            WHERE public_id IN (SELECT value FROM json_each(:ids))""",
    },
)
