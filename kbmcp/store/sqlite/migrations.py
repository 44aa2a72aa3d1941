"""Versioned schema migrations.

Migrations are the numbered `sql/NNN_name.sql` files, applied in order, all pending ones in one
transaction together with the `PRAGMA user_version` bumps that record them. A fresh file and an
upgraded file pass through the same steps, so they end in the same schema
(tests/test_migrations.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from kbmcp.errors import StoreError
from kbmcp.store.migrations import Migration, read_migrations


def all_migrations() -> list[Migration]:
    return read_migrations("kbmcp.store.sqlite")


def latest_version() -> int:
    return len(all_migrations())


def current_version(conn: apsw.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(
    conn: apsw.Connection,
    *,
    target: int | None = None,
    finish: Callable[[apsw.Connection], None] | None = None,
) -> list[int]:
    """Apply the pending migrations up to `target` (default: all) in ONE transaction, then
    `finish` (the id key of a new file) in the same one: a new file is created whole or stays
    empty, an upgrade happens whole or not at all (a full disk half-way leaves the old version).
    Returns the versions applied."""
    migrations = all_migrations()
    goal = len(migrations) if target is None else target
    if current_version(conn) >= goal:
        return []
    # Foreign keys are off while migrations run (set outside the transaction: SQLite ignores the
    # pragma inside one) and checked before COMMIT instead: a migration that rebuilds a table
    # drops the old one, which with them on deletes its rows first, cascading (012).
    enforced = bool(conn.execute("PRAGMA foreign_keys").fetchone()[0])
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            pending = migrations[current_version(conn) : goal]
            if pending:
                broken_before = _broken_references(conn)
                for migration in pending:
                    conn.execute(migration.sql)
                    conn.execute(f"PRAGMA user_version = {migration.version}")
                if _broken_references(conn) > broken_before:
                    raise StoreError(
                        f"migrations {pending[0].version}-{pending[-1].version} would leave "
                        "rows whose references do not resolve; the file is unchanged"
                    )
                if finish is not None:
                    finish(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if enforced else 'OFF'}")
    return [migration.version for migration in pending]


def _broken_references(conn: apsw.Connection) -> int:
    """Rows whose foreign keys do not resolve (PRAGMA foreign_key_check). Compared before and
    after the migrations, so a file that already held some (written by another tool with
    foreign keys off) can still be upgraded."""
    return len(conn.execute("PRAGMA foreign_key_check").fetchall())
