"""The id key concern (kbmcp/store/id_key.py) on PostgreSQL: created once, in the migration
transaction of a new database, read by every write that makes a public id."""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.clock import now_iso
from kbmcp.errors import StoreError
from kbmcp.ids import IdKey, new_id_key
from kbmcp.store.id_key import IdKeyInfo

SELECT_ID_KEY = "SELECT key FROM id_key WHERE id = 1"
SELECT_ID_KEY_INFO = "SELECT origin, unkeyed_before, created_at FROM id_key WHERE id = 1"
# One row: of two processes creating the database at once, the first INSERT wins.
INSERT_ID_KEY = """
INSERT INTO id_key (id, key, origin, unkeyed_before, created_at)
VALUES (1, %(key)s, %(origin)s, (EXISTS (SELECT 1 FROM tenant))::integer, %(now)s)
ON CONFLICT (id) DO NOTHING
"""


def ensure_id_key(conn: psycopg.Connection[Any]) -> None:
    if conn.execute(SELECT_ID_KEY).fetchone() is not None:
        return
    made = new_id_key()
    conn.execute(
        INSERT_ID_KEY,
        {"key": made.key, "origin": "pinned" if made.pinned else "random", "now": now_iso()},
    )


def id_key_of(conn: psycopg.Connection[Any]) -> IdKey:
    row = conn.execute(SELECT_ID_KEY).fetchone()
    if row is None:
        raise StoreError("this database has no id key yet: open it once with write access")
    return IdKey(bytes(row[0]))


def id_key_info(conn: psycopg.Connection[Any]) -> IdKeyInfo | None:
    row = conn.execute(SELECT_ID_KEY_INFO).fetchone()
    return None if row is None else IdKeyInfo(row[0], bool(row[1]), row[2])
