"""What a backend's driver does differently around the same SQL logic.

The logic of a concern (kbmcp/store/<concern>.py) runs a backend's statements through
`conn.execute(sql, params)`, which apsw and psycopg share, reading rows with `fetchone()` or by
iterating. The few steps their drivers take differently go through the backend's `Dialect`
(kbmcp/store/sqlite/dialect.py, kbmcp/store/postgres/dialect.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection


class Dialect:
    def insert(self, conn: Connection, sql: str, params: Mapping[str, object]) -> int | None:
        """Run an INSERT of one row and return its id; None when it inserted nothing (a
        PostgreSQL `ON CONFLICT DO NOTHING`, whose statements end in `RETURNING id`)."""
        raise NotImplementedError

    def execute_many(
        self, conn: Connection, sql: str, rows: Sequence[Mapping[str, object]]
    ) -> None:
        """Run `sql` once per parameter set."""
        raise NotImplementedError

    def execute_count(self, conn: Connection, sql: str, params: Mapping[str, object]) -> int:
        """Run an UPDATE or DELETE and return how many rows it changed."""
        raise NotImplementedError

    def list_param(self, values: Sequence[int] | Sequence[str]) -> object:
        """A list of ids or names as one parameter (SQLite: JSON text for `json_each`;
        PostgreSQL: an array)."""
        raise NotImplementedError

    def array(self, value: Any) -> list[Any]:
        """A column holding a list as the statements select it (SQLite: JSON text from
        `json_group_array`, or NULL; PostgreSQL: an array)."""
        raise NotImplementedError

    def pairs(self, value: Any) -> list[tuple[str, str]]:
        """A column of (key, value) tag pairs, a list of two-element lists."""
        return [(key, tag) for key, tag in self.array(value)]
