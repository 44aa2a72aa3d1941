"""The PostgreSQL dialect (kbmcp/store/dialect.py): psycopg's ways."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

PgConnection = psycopg.Connection[Any]


class PostgresDialect:
    def insert(self, conn: PgConnection, sql: str, params: Mapping[str, object]) -> int | None:
        row = conn.execute(sql, params).fetchone()
        return None if row is None else int(row[0])

    def execute_many(
        self, conn: PgConnection, sql: str, rows: Sequence[Mapping[str, object]]
    ) -> None:
        if rows:
            with conn.cursor() as cur:
                cur.executemany(sql, rows)

    def id_list(self, ids: Sequence[int]) -> list[int]:
        return list(ids)

    def pairs(self, value: Any) -> list[tuple[str, str]]:
        return [(key, tag) for key, tag in value]


POSTGRES = PostgresDialect()
