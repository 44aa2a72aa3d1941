"""The audit concern (kbmcp/store/audit.py) on PostgreSQL."""

from __future__ import annotations

from kbmcp.store.audit import SELECT_EVENTS_TEMPLATE, SqlAudit
from kbmcp.store.postgres.dialect import POSTGRES


class PostgresAudit(SqlAudit):
    dialect = POSTGRES
    INSERT_EVENT = """
        INSERT INTO audit_event
            (tenant_id, at, token_id, via, action, outcome, objects, detail, count)
        VALUES (%(tenant_id)s, %(at)s, %(token_id)s, %(via)s, %(action)s, %(outcome)s,
                %(objects)s, %(detail)s, %(count)s)
    """
    # Trap: a parameter that may be NULL needs a type in `%(x)s IS NULL` (psycopg sends
    # untyped NULLs and PostgreSQL cannot infer one there), hence the casts.
    SELECT_EVENTS = SELECT_EVENTS_TEMPLATE.format(
        since="%(since)s::text",
        token_id="%(token_id)s::text",
        tenant_id="%(tenant_id)s::bigint",
        limit="%(limit)s",
    )
    DELETE_BEFORE = "DELETE FROM audit_event WHERE at < %(before)s"


AUDIT = PostgresAudit()
