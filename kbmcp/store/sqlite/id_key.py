"""The id key concern (kbmcp/store/id_key.py) on SQLite: the file's id key (migration 7),
created once, right after the migrations, read by every write that makes a public id
(kbmcp/ids.py says why ids are keyed)."""

from __future__ import annotations

import apsw

from kbmcp.clock import now_iso
from kbmcp.errors import StoreError
from kbmcp.ids import IdKey, new_id_key
from kbmcp.store.id_key import IdKeyInfo

SELECT_ID_KEY = "SELECT key FROM id_key WHERE id = 1"
SELECT_ID_KEY_INFO = "SELECT origin, unkeyed_before, created_at FROM id_key WHERE id = 1"
# One row: of two processes creating a file at once, the first INSERT wins and both use its key.
# A file that already has tenants was written by a kbmcp without keyed ids (an upgrade).
INSERT_ID_KEY = """
INSERT OR IGNORE INTO id_key (id, key, origin, unkeyed_before, created_at)
VALUES (1, :key, :origin, EXISTS (SELECT 1 FROM tenant), :now)
"""


def ensure_id_key(conn: apsw.Connection) -> None:
    """Give a writable, migrated file its id key if it has none (a new file, or one upgraded
    from before migration 7). Costs one indexed read when the key exists."""
    if conn.execute(SELECT_ID_KEY).fetchone() is not None:
        return
    made = new_id_key()
    conn.execute(
        INSERT_ID_KEY,
        {"key": made.key, "origin": "pinned" if made.pinned else "random", "now": now_iso()},
    )


def id_key_of(conn: apsw.Connection) -> IdKey:
    """The key every public id of this file is made with."""
    row = conn.execute(SELECT_ID_KEY).fetchone()
    if row is None:
        # Only a file opened without migrations (or read-only before its first writable open
        # finished) can lack one; making unkeyed ids would be the leak the key exists to stop.
        raise StoreError(
            f"{conn.db_filename('main') or 'this file'} has no id key yet: open it once with "
            "write access (any kbmcp command does)"
        )
    return IdKey(bytes(row[0]))


def id_key_info(conn: apsw.Connection) -> IdKeyInfo | None:
    row = conn.execute(SELECT_ID_KEY_INFO).fetchone()
    return None if row is None else IdKeyInfo(row[0], bool(row[1]), row[2])
