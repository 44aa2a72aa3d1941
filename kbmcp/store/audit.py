"""The audit concern of the store contract: the append-only trail of writes, refusals and
search counts (kbmcp/service/audit.py decides what is recorded; migrations 13 on SQLite and 7
on PostgreSQL hold the table).

The logic is written once here (`SqlAudit`); kbmcp/store/sqlite/audit.py and
kbmcp/store/postgres/audit.py give it their statements and dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect


@dataclass(frozen=True)
class NewAuditEvent:
    tenant_id: int  # the acting tenant's row id; 0 when none is known
    at: str  # ISO 8601 UTC
    token_id: str | None
    via: str
    action: str
    outcome: str
    objects: str  # JSON text: a list of public ids
    detail: str  # JSON text: an object
    count: int = 1


@dataclass(frozen=True)
class AuditRow:
    id: int
    at: str
    tenant_id: int
    tenant: str | None  # the tenant's name; None for tenant 0 (or a tenant gone since)
    token_id: str | None
    via: str
    action: str
    outcome: str
    objects: str  # JSON text
    detail: str  # JSON text
    count: int


class Audit(Protocol):
    def append(self, conn: Connection, events: Sequence[NewAuditEvent]) -> None:
        """Insert the events (inside the caller's write transaction)."""
        ...

    def events(
        self,
        conn: Connection,
        *,
        since: str | None,
        token_id: str | None,
        tenant_id: int | None,
        limit: int,
    ) -> list[AuditRow]:
        """The newest `limit` events at or after `since` (of one token, one tenant), oldest
        first."""
        ...

    def prune(self, conn: Connection, before: str) -> int:
        """Delete the events older than `before`; how many went."""
        ...


class SqlAudit:
    """`Audit` over a backend's statements (named parameters) and dialect."""

    dialect: ClassVar[Dialect]
    INSERT_EVENT: ClassVar[str]
    SELECT_EVENTS: ClassVar[str]
    DELETE_BEFORE: ClassVar[str]

    def append(self, conn: Connection, events: Sequence[NewAuditEvent]) -> None:
        self.dialect.execute_many(
            conn,
            self.INSERT_EVENT,
            [
                {
                    "tenant_id": e.tenant_id,
                    "at": e.at,
                    "token_id": e.token_id,
                    "via": e.via,
                    "action": e.action,
                    "outcome": e.outcome,
                    "objects": e.objects,
                    "detail": e.detail,
                    "count": e.count,
                }
                for e in events
            ],
        )

    def events(
        self,
        conn: Connection,
        *,
        since: str | None,
        token_id: str | None,
        tenant_id: int | None,
        limit: int,
    ) -> list[AuditRow]:
        rows = conn.execute(
            self.SELECT_EVENTS,
            {"since": since, "token_id": token_id, "tenant_id": tenant_id, "limit": limit},
        )
        found = [
            AuditRow(
                id=int(row[0]),
                at=row[1],
                tenant_id=int(row[2]),
                tenant=row[3],
                token_id=row[4],
                via=row[5],
                action=row[6],
                outcome=row[7],
                objects=_json_text(row[8]),
                detail=_json_text(row[9]),
                count=int(row[10]),
            )
            for row in rows
        ]
        found.reverse()  # selected newest first (for the limit), shown oldest first
        return found

    def prune(self, conn: Connection, before: str) -> int:
        return self.dialect.execute_count(conn, self.DELETE_BEFORE, {"before": before})


def _json_text(value: object) -> str:
    """A JSON column as text: SQLite returns the stored text; psycopg parses `json` columns."""
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, ensure_ascii=False)


# The statement both backends share, in each one's parameter style (`{p}` placeholders):
# optional filters are `:x IS NULL OR column = :x`; newest first so LIMIT keeps the newest.
SELECT_EVENTS_TEMPLATE = """
SELECT e.id, e.at, e.tenant_id, t.name, e.token_id, e.via, e.action, e.outcome, e.objects,
       e.detail, e.count
FROM audit_event AS e
LEFT JOIN tenant AS t ON t.id = e.tenant_id
WHERE ({since} IS NULL OR e.at >= {since})
  AND ({token_id} IS NULL OR e.token_id = {token_id})
  AND ({tenant_id} IS NULL OR e.tenant_id = {tenant_id})
ORDER BY e.at DESC, e.id DESC
LIMIT {limit}
"""
