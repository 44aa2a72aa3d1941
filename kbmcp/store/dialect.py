"""What a backend's driver does differently around the same SQL logic.

The logic of a concern (kbmcp/store/<concern>.py) runs a backend's statements through
`conn.execute(sql, params)`, which apsw and psycopg share, reading rows with `fetchone()` or by
iterating. The few steps their drivers take differently go through the backend's `Dialect`
(kbmcp/store/sqlite/dialect.py, kbmcp/store/postgres/dialect.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection


class Dialect(Protocol):
    def insert(self, conn: Connection, sql: str, params: Mapping[str, object]) -> int | None:
        """Run an INSERT of one row and return its id; None when it inserted nothing (a
        PostgreSQL `ON CONFLICT DO NOTHING`, whose statements end in `RETURNING id`)."""
        ...

    def execute_many(
        self, conn: Connection, sql: str, rows: Sequence[Mapping[str, object]]
    ) -> None:
        """Run `sql` once per parameter set."""
        ...

    def id_list(self, ids: Sequence[int]) -> object:
        """A list of row ids as one parameter (SQLite: JSON text for `json_each`; PostgreSQL: an
        array)."""
        ...

    def pairs(self, value: Any) -> list[tuple[str, str]]:
        """A column of (key, value) tag pairs as the statements select them (SQLite: JSON text
        or NULL; PostgreSQL: an array of two-element arrays)."""
        ...
