"""The id key concern (kbmcp/store/id_key.py) on PostgreSQL: created once, in the migration
transaction of a new database, read by every write that makes a public id."""

from __future__ import annotations

from kbmcp.store.id_key import SqlIdKeys


class PostgresIdKeys(SqlIdKeys):
    SELECT_ID_KEY = "SELECT key FROM id_key WHERE id = 1"
    SELECT_ID_KEY_INFO = "SELECT origin, unkeyed_before, created_at FROM id_key WHERE id = 1"
    # One row: of two processes creating the database at once, the first INSERT wins.
    INSERT_ID_KEY = """
    INSERT INTO id_key (id, key, origin, unkeyed_before, created_at)
    VALUES (1, %(key)s, %(origin)s, (EXISTS (SELECT 1 FROM tenant))::integer, %(now)s)
    ON CONFLICT (id) DO NOTHING
    """


ID_KEYS = PostgresIdKeys()
# The migrations and bench/ scripts call these as functions of the module.
ensure_id_key = ID_KEYS.ensure_id_key
id_key_of = ID_KEYS.id_key_of
