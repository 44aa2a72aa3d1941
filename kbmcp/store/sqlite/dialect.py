"""The SQLite dialect (kbmcp/store/dialect.py): apsw's ways."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import apsw


class SqliteDialect:
    def insert(self, conn: apsw.Connection, sql: str, params: Mapping[str, object]) -> int:
        conn.execute(sql, params)
        return conn.last_insert_rowid()

    def execute_many(
        self, conn: apsw.Connection, sql: str, rows: Sequence[Mapping[str, object]]
    ) -> None:
        conn.executemany(sql, rows)

    def id_list(self, ids: Sequence[int]) -> str:
        return json.dumps(list(ids))

    def pairs(self, value: Any) -> list[tuple[str, str]]:
        return [(key, tag) for key, tag in json.loads(value or "[]")]


SQLITE = SqliteDialect()
