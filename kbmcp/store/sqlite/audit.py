"""The audit concern (kbmcp/store/audit.py) on SQLite."""

from __future__ import annotations

from kbmcp.store.audit import SELECT_EVENTS_TEMPLATE, SqlAudit
from kbmcp.store.sqlite.dialect import SQLITE


class SqliteAudit(SqlAudit):
    dialect = SQLITE
    INSERT_EVENT = """
        INSERT INTO audit_event
            (tenant_id, at, token_id, via, action, outcome, objects, detail, count)
        VALUES (:tenant_id, :at, :token_id, :via, :action, :outcome, :objects, :detail, :count)
    """
    SELECT_EVENTS = SELECT_EVENTS_TEMPLATE.format(
        since=":since", token_id=":token_id", tenant_id=":tenant_id", limit=":limit"
    )
    DELETE_BEFORE = "DELETE FROM audit_event WHERE at < :before"


AUDIT = SqliteAudit()
