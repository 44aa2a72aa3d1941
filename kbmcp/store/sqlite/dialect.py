"""The SQLite dialect (kbmcp/store/dialect.py): apsw's ways."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import apsw

from kbmcp.store.dialect import Dialect


class SqliteDialect(Dialect):
    def insert(self, conn: apsw.Connection, sql: str, params: Mapping[str, object]) -> int:
        conn.execute(sql, params)
        return conn.last_insert_rowid()

    def execute_many(
        self, conn: apsw.Connection, sql: str, rows: Sequence[Mapping[str, object]]
    ) -> None:
        conn.executemany(sql, rows)

    def execute_count(self, conn: apsw.Connection, sql: str, params: Mapping[str, object]) -> int:
        conn.execute(sql, params)
        return conn.changes()

    def list_param(self, values: Sequence[int] | Sequence[str]) -> str:
        return json.dumps(list(values))

    def array(self, value: Any) -> list[Any]:
        return list(json.loads(value or "[]"))


SQLITE = SqliteDialect()
