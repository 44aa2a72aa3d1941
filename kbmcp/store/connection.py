"""Opening the SQLite file: apsw, sqlite-vec, WAL, foreign keys, busy timeout, migrations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import apsw
import sqlite_vec

from kbmcp.errors import StoreError
from kbmcp.store.migrations import latest_version, migrate

BUSY_TIMEOUT_MS = 10_000
MMAP_BYTES = 1 << 30


def open_connection(path: Path | str, *, apply_migrations: bool = True) -> apsw.Connection:
    """Open (creating if needed) the knowledge-base file, ready for use.

    WAL lets the stdio server, the HTTP server and the CLI share one file: readers never block the
    writer. Writers wait up to BUSY_TIMEOUT_MS for each other instead of failing with "locked".
    """
    db_path = Path(path)
    if str(path) != ":memory:":
        db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = apsw.Connection(str(db_path))
    except apsw.CantOpenError as exc:
        raise StoreError(f"cannot open database file {db_path}: {exc}") from None
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
    except apsw.NotADBError:
        raise StoreError(f"{db_path} is not a kbmcp database (not an SQLite file)") from None
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    if apply_migrations:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > latest_version():
            raise StoreError(
                f"{db_path} has schema version {version}, newer than this kbmcp "
                f"understands ({latest_version()}); upgrade kbmcp"
            )
        migrate(conn)
    return conn


@contextlib.contextmanager
def write_transaction(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A short write transaction. BEGIN IMMEDIATE takes the write lock up front, so two writers
    queue on the busy timeout instead of deadlocking on a read->write upgrade."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
