"""The scan concern of the store contract: the most recently updated (or created) published
documents and memories of a scope, newest first, within a time window (scan mode).

Implemented by kbmcp/store/sqlite/scan.py and kbmcp/store/postgres/scan.py (their statement
under `SqlScan`, the logic both share); used by
kbmcp/service/scan.py. The scope's documents come from the backend's scope SQL (the search
engine's), so scan and search validate and apply every filter the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.search.resolved import Scope
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect
    from kbmcp.store.search import ScopeSql

# sort -> what it orders by, newest first; since/until window the same timestamp.
SORTS = ("updated_desc", "created_desc")
DEFAULT_SORT = "updated_desc"


@dataclass(frozen=True)
class RecentRow:
    store_kind: str  # knowledge_base.kind: 'documents' or 'memories'
    document_id: str
    knowledge_base_id: str
    revision_id: str
    revision_number: int
    path: str
    title: str
    updated_at: str
    created_at: str
    char_count: int
    tags: list[tuple[str, str]]  # ordered by key, then value (byte order)
    first_text: str | None  # the start of the first chunk: at most excerpt_chars + 1 characters


class Scan(Protocol):
    def recent(
        self,
        conn: Connection,
        scope: Scope,
        *,
        sort: str,
        since: str | None,
        until: str | None,
        limit: int,
        excerpt_chars: int,
    ) -> list[RecentRow]:
        """At most `limit` published documents and memories of the scope, newest first by
        `sort` (one of SORTS), then by public id (byte order); `since` (inclusive) and `until`
        (exclusive) window the same timestamp (ISO 8601 UTC text, compared as bytes)."""
        ...


class SqlScan:
    """Scan (the `Scan` Protocol) over a backend's statement: SELECT_RECENT, formatted with the
    scope's documents ({documents}, the backend's scope SQL) and the timestamp of the sort
    ({time}, a column of SORT_COLUMNS, never caller text); its tags a column of pairs."""

    dialect: ClassVar[Dialect]
    scope_sql: ClassVar[ScopeSql]

    SELECT_RECENT: ClassVar[str]
    # sort (one of SORTS) -> the column it orders by, newest first; since/until window it.
    SORT_COLUMNS: ClassVar[dict[str, str]]

    def recent(
        self,
        conn: Connection,
        scope: Scope,
        *,
        sort: str,
        since: str | None,
        until: str | None,
        limit: int,
        excerpt_chars: int,
    ) -> list[RecentRow]:
        statement = self.SELECT_RECENT.format(
            documents=self.scope_sql.documents_sql(scope), time=self.SORT_COLUMNS[sort]
        )
        rows = conn.execute(
            statement,
            {
                **self.scope_sql.scope_params(scope),
                "excerpt_chars": excerpt_chars,
                "since": since,
                "until": until,
                "limit": limit,
            },
        )
        return [RecentRow(*row[:10], self.dialect.pairs(row[10]), row[11]) for row in rows]
