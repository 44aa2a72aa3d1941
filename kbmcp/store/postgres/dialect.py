"""The PostgreSQL dialect (kbmcp/store/dialect.py): psycopg's ways."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from kbmcp.store.dialect import Dialect

PgConnection = psycopg.Connection[Any]


class PostgresDialect(Dialect):
    def insert(self, conn: PgConnection, sql: str, params: Mapping[str, object]) -> int | None:
        row = conn.execute(sql, params).fetchone()
        return None if row is None else int(row[0])

    def execute_many(
        self, conn: PgConnection, sql: str, rows: Sequence[Mapping[str, object]]
    ) -> None:
        if rows:
            with conn.cursor() as cur:
                cur.executemany(sql, rows)

    def execute_count(self, conn: PgConnection, sql: str, params: Mapping[str, object]) -> int:
        return conn.execute(sql, params).rowcount

    def list_param(self, values: Sequence[int] | Sequence[str]) -> list[Any]:
        return list(values)

    def array(self, value: Any) -> list[Any]:
        return list(value)


POSTGRES = PostgresDialect()
