"""Opening the SQLite file: apsw, sqlite-vec, WAL, foreign keys, busy timeout, migrations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import apsw
import sqlite_vec

from kbmcp.errors import StoreError
from kbmcp.store.migrations import current_version, latest_version, migrate

BUSY_TIMEOUT_MS = 10_000
MMAP_BYTES = 1 << 30


def open_connection(
    path: Path | str, *, apply_migrations: bool = True, create: bool = True
) -> apsw.Connection:
    """Open (creating if needed) the knowledge-base file, ready for use.

    WAL lets the stdio server, the HTTP server and the CLI share one file: readers never block the
    writer. Writers wait up to BUSY_TIMEOUT_MS for each other instead of failing with "locked".
    A file that is not an SQLite database, is damaged, or has a newer schema is a StoreError.
    """
    db_path = Path(path)
    if not create and str(path) != ":memory:" and not db_path.exists():
        raise StoreError(
            f"there is no knowledge-base file at {db_path}: add documents first with "
            "`kbmcp add PATH`, or point --db / KBMCP_DB at an existing file"
        )
    if str(path) != ":memory:":
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder {db_path.parent} for database file {db_path}: "
                f"{exc.strerror or exc}"
            ) from None
    try:
        conn = apsw.Connection(str(db_path))
    except apsw.CantOpenError as exc:
        raise StoreError(f"cannot open database file {db_path}: {exc}") from None
    try:
        _configure(conn)
        if apply_migrations:
            _check_version(conn, db_path)
            migrate(conn)
    except apsw.NotADBError:
        conn.close()
        raise StoreError(f"{db_path} is not a kbmcp database (not an SQLite file)") from None
    except apsw.CorruptError as exc:
        conn.close()
        raise StoreError(f"{db_path} is damaged ({exc}); restore it from a backup") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _configure(conn: apsw.Connection) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")


def _check_version(conn: apsw.Connection, db_path: Path) -> None:
    version = current_version(conn)
    if version > latest_version():
        raise StoreError(
            f"{db_path} has schema version {version}, newer than this kbmcp "
            f"understands ({latest_version()}); upgrade kbmcp"
        )


@contextlib.contextmanager
def write_transaction(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A short write transaction. BEGIN IMMEDIATE takes the write lock up front, so two writers
    queue on the busy timeout instead of deadlocking on a read->write upgrade."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        # SQLite rolls back by itself after some errors (a full disk, an I/O error); rolling back
        # again would replace the real error with "no transaction is active".
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
