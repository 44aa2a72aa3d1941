"""The id key concern (kbmcp/store/id_key.py) on SQLite: the file's id key (migration 7),
created once, right after the migrations (a new file, or one upgraded from before migration 7),
read by every write that makes a public id (kbmcp/ids.py says why ids are keyed)."""

from __future__ import annotations

import apsw

from kbmcp.errors import StoreError
from kbmcp.store.id_key import SqlIdKeys


class SqliteIdKeys(SqlIdKeys):
    SELECT_ID_KEY = "SELECT key FROM id_key WHERE id = 1"
    SELECT_ID_KEY_INFO = "SELECT origin, unkeyed_before, created_at FROM id_key WHERE id = 1"
    # One row: of two processes creating a file at once, the first INSERT wins and both use its
    # key. A file that already has tenants was written by a kbmcp without keyed ids (an upgrade).
    INSERT_ID_KEY = """
    INSERT OR IGNORE INTO id_key (id, key, origin, unkeyed_before, created_at)
    VALUES (1, :key, :origin, EXISTS (SELECT 1 FROM tenant), :now)
    """

    def missing_key(self, conn: apsw.Connection) -> StoreError:
        return StoreError(
            f"{conn.db_filename('main') or 'this file'} has no id key yet: open it once with "
            "write access (any kbmcp command does)"
        )


ID_KEYS = SqliteIdKeys()
# The connection code and bench/ scripts call these as functions of the module.
ensure_id_key = ID_KEYS.ensure_id_key
id_key_of = ID_KEYS.id_key_of
id_key_info = ID_KEYS.id_key_info
