"""Opening the SQLite file: apsw, sqlite-vec, WAL, foreign keys, busy timeout, migrations.

Which file may be written is decided here, once, for every command and both servers:
- a missing file is created only when the caller asks (`create=True`: `kbmcp add`,
  `kbmcp serve --create`); reading commands get a StoreError naming the path;
- an empty file becomes a knowledge base only when the caller may create one; a foreign SQLite
  file (another application's tables) is never written to, not even by `add`;
- a file that is not writable (read-only mount, `chmod a-w`, a shipped file) is opened read-only:
  no WAL switch, no migration, and every write transaction is refused with a `ReadOnly` error.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib.util
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import apsw

from kbmcp.errors import ReadOnly, StoreError
from kbmcp.store.sqlite.disk_full import disk_full_error, is_disk_full
from kbmcp.store.sqlite.files import create_private_file, make_private_folder
from kbmcp.store.sqlite.id_key import ensure_id_key
from kbmcp.store.sqlite.migrations import current_version, latest_version, migrate
from kbmcp.store.sqlite.new_file import remove_if_empty
from kbmcp.store.sqlite.schema_check import schema_mismatch
from kbmcp.store.sqlite.wal import WAL_SIZE_LIMIT, keep_wal_small

BUSY_TIMEOUT_MS = 10_000
logger = logging.getLogger(__name__)
MMAP_BYTES = 1 << 30
# apsw's statement cache is a ring: every statement run goes back into the next slot and pushes
# out whatever was there, so a prepared statement survives only while fewer than this many
# statement runs follow it. A search runs ~13; with apsw's default of 100, a server answering
# eight kinds of request in turn (modes, limits, scopes) re-prepared its ranking statement at
# every search (~0.35 ms of planning the CTEs: SciFact semantic k=10 spent ~1 ms in the
# statement interleaved, ~0.25 alone). 512 slots keep ~40 searches' statements. Memory: a slot
# holds at most one prepared statement, a ranking statement ~50 KB (one per mode's channel
# shape, scope form and limit), most others a few KB: a few MB in use, ~25 MB at worst for a
# connection whose callers cycle through hundreds of shapes.
STATEMENT_CACHE_SIZE = 512
# Tables every kbmcp file has since migration 1: how a kbmcp file is told from a foreign one.
KBMCP_TABLES = frozenset({"tenant", "knowledge_base", "document", "revision", "chunk"})
MEMORY = ":memory:"


class FileKind(enum.Enum):
    EMPTY = "empty"  # no tables yet (a 0-byte file or a fresh SQLite file)
    KBMCP = "kbmcp"


def open_connection(
    path: Path | str,
    *,
    apply_migrations: bool = True,
    create: bool = True,
    immutable: bool = False,
) -> apsw.Connection:
    """Open the knowledge-base file, ready for use (`create`: a missing or empty file may become
    a new knowledge base; otherwise it is a StoreError). `immutable`: the caller promises that
    nobody writes the file while it is open (a shipped, frozen file): it is read without any
    locking, which works on any read-only medium (see _connect_immutable).

    WAL lets the stdio server, the HTTP server and the CLI share one file: readers never block the
    writer. Writers wait up to BUSY_TIMEOUT_MS for each other instead of failing with "locked".
    A file that is not an SQLite database, is damaged, belongs to another application or has a
    newer schema is a StoreError.
    """
    if str(path) == MEMORY:
        conn = _apsw_connection(MEMORY)
        return _prepare(
            conn, Path(MEMORY), read_only=False, create=True, apply_migrations=apply_migrations
        )
    db_path = Path(path)
    if not db_path.exists():
        if not create:
            raise StoreError(
                f"there is no knowledge-base file at {db_path}: add documents first with "
                "`kbmcp add PATH` (or start an empty one with `kbmcp serve --create`), or point "
                "--db / KBMCP_DB at an existing file",
                details={"path": str(db_path)},
            )
        created = _create_file(db_path)
    else:
        created = False
    read_only = immutable or (db_path.exists() and not is_writable(db_path))
    try:
        conn = _connect_immutable(db_path) if immutable else _connect(db_path, read_only)
        return _prepare(
            conn, db_path, read_only=read_only, create=create, apply_migrations=apply_migrations
        )
    except BaseException:
        if created:
            _remove_unfinished(db_path)
        raise


def _apsw_connection(
    filename: str, flags: int = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
) -> apsw.Connection:
    """A connection to a knowledge base (every way of opening one comes through here, so each
    keeps STATEMENT_CACHE_SIZE statements prepared); `flags` default to apsw's own."""
    return apsw.Connection(filename, flags=flags, statementcachesize=STATEMENT_CACHE_SIZE)


def _remove_unfinished(db_path: Path) -> None:
    """Remove a file this call created and could not make a knowledge base (a full disk during
    the migrations): "complete or absent". Only while it holds nothing and no other connection
    has it open: another process that opened the new file meanwhile and finished it keeps it."""
    remove_if_empty(db_path)


def is_writable(db_path: Path) -> bool:
    """Whether kbmcp may write the file. A file without any write bit (`chmod a-w`) counts as
    read-only even for root, who could write it anyway: that is what its owner asked for. The
    folder must be writable too: SQLite creates its journal and WAL files beside the file."""
    try:
        mode = db_path.stat().st_mode
    except OSError:
        return False
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return False
    return os.access(db_path, os.W_OK) and os.access(db_path.parent, os.W_OK)


def _create_file(db_path: Path) -> bool:
    """An empty, private (0600) file, in private folders if they are missing: SQLite gives its
    -wal and -shm files the same mode (files.py). False if another process created the file
    first."""
    try:
        make_private_folder(db_path.parent)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {db_path.parent} for database file {db_path}: "
            f"{exc.strerror or exc}"
        ) from None
    try:
        return create_private_file(db_path)
    except OSError as exc:
        raise StoreError(
            f"cannot create database file {db_path}: {exc.strerror or exc}",
            details={"path": str(db_path)},
        ) from None


def _connect(db_path: Path, read_only: bool) -> apsw.Connection:
    try:
        if not read_only:
            return _apsw_connection(str(db_path))
        return _connect_read_only(db_path)
    except apsw.CantOpenError as exc:
        raise StoreError(
            f"cannot open database file {db_path}: {exc}", details={"path": str(db_path)}
        ) from None


def _connect_read_only(db_path: Path) -> apsw.Connection:
    """A read-only connection with normal locking, so it sees what writers commit meanwhile
    (the host writing through its own path while a container reads a read-only mount).

    A WAL-mode file needs its `-shm` file (the index of the WAL, shared by every process that
    has the file open). If it exists, a read-only connection uses it even on a read-only mount.
    If it does not and the folder is read-only, it cannot be created: the file is refused with
    the ways out, never opened `immutable` behind the user's back (immutable skips all locking
    and change detection, so a later write by anyone makes it read garbage:
    "database disk image is malformed")."""
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    conn = _apsw_connection(_uri(db_path) + "?mode=ro", flags)
    try:
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except apsw.CantOpenError:
        conn.close()
        raise StoreError(
            f"cannot read {db_path}: it is a WAL-mode file whose -shm file is missing, and its "
            "folder is read-only so the -shm cannot be created. If it is written elsewhere (the "
            "host of a read-only mount), keep a process there that has it open (`kbmcp serve`, "
            "`kbmcp watch`), so its -shm exists; if nobody ever writes it, pass --immutable; or "
            "ship a single-file copy made with `kbmcp backup`",
            details={"path": str(db_path)},
        ) from None
    except apsw.Error:
        pass  # not a database, damaged...: reported by _prepare with the usual message
    return conn


def _connect_immutable(db_path: Path) -> apsw.Connection:
    """A connection that reads the file as a constant: no locks, no -shm, no WAL. Only what
    the main file holds is seen, so a -wal file with content (changes not yet copied into the
    file) is refused rather than silently ignored."""
    if not db_path.exists():
        raise StoreError(
            f"there is no knowledge-base file at {db_path}", details={"path": str(db_path)}
        )
    wal = Path(f"{db_path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(
            f"{db_path} cannot be read as immutable: {wal} holds changes not yet in the file "
            "(a writer has it open, or stopped without a checkpoint). Run any kbmcp command on "
            "it with write access to fold them in, or make a frozen copy with `kbmcp backup`",
            details={"path": str(db_path)},
        )
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    try:
        return _apsw_connection(_uri(db_path) + "?mode=ro&immutable=1", flags)
    except apsw.CantOpenError as exc:
        raise StoreError(
            f"cannot open database file {db_path}: {exc}", details={"path": str(db_path)}
        ) from None


def _uri(db_path: Path) -> str:
    return "file:" + quote(str(db_path.resolve()))


def _prepare(
    conn: apsw.Connection,
    db_path: Path,
    *,
    read_only: bool,
    create: bool,
    apply_migrations: bool,
) -> apsw.Connection:
    try:
        load_sqlite_vec(conn)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        kind = _file_kind(conn, db_path)
        if kind is FileKind.EMPTY and not create:
            raise StoreError(
                f"{db_path} is an empty file, not a knowledge base yet: add documents with "
                "`kbmcp add PATH`, or point --db / KBMCP_DB at an existing knowledge base",
                details={"path": str(db_path)},
            )
        if kind is FileKind.EMPTY and read_only:
            raise ReadOnly(
                f"{db_path} is an empty, read-only file: kbmcp cannot make it a knowledge base",
                details={"path": str(db_path)},
            )
        if apply_migrations:
            # Before anything is written: a newer or inconsistent schema is refused untouched.
            _check_version(conn, db_path, read_only=read_only)
        if not read_only:
            # Only now, once the file is known to be ours: switching to WAL writes to the file.
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # After a checkpoint restarts the WAL, its file is cut back to this size.
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        if apply_migrations and not read_only:
            # A new file gets its tables and its id key in one transaction: whole or empty.
            migrate(conn, finish=ensure_id_key)
            ensure_id_key(conn)  # a file migrated before it had a key (one read otherwise)
    except apsw.NotADBError:
        conn.close()
        raise StoreError(f"{db_path} is not a kbmcp database (not an SQLite file)") from None
    except apsw.CorruptError as exc:
        conn.close()
        raise StoreError(f"{db_path} is damaged ({exc}); restore it from a backup") from None
    except Exception as exc:
        if not is_disk_full(exc, conn.system_errno):
            conn.close()
            raise
        error = disk_full_error(conn, exc)
        conn.close()
        raise error from None
    except BaseException:
        conn.close()
        raise
    return conn


def load_sqlite_vec(conn: apsw.Connection) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec_path())
    conn.enable_load_extension(False)


@functools.cache
def sqlite_vec_path() -> str:
    """The sqlite-vec extension's file, as `sqlite_vec.loadable_path()` gives it, found without
    importing the package: its __init__ imports numpy and sqlite3 (~70 ms), which commands that
    only read the file (`kbmcp ls`) do not need."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("the sqlite-vec package is not installed: pip install sqlite-vec")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def _file_kind(conn: apsw.Connection, db_path: Path) -> FileKind:
    """EMPTY or KBMCP (read without writing anything); another application's file is an error."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    if not tables and current_version(conn) == 0:
        return FileKind.EMPTY
    if tables >= KBMCP_TABLES:
        return FileKind.KBMCP
    shown = ", ".join(sorted(tables)[:5]) or "none"
    raise StoreError(
        f"{db_path} is an SQLite database of another application (tables: {shown}), not a "
        "kbmcp knowledge base; kbmcp does not write into it: choose another --db / KBMCP_DB",
        details={"path": str(db_path)},
    )


def _check_version(conn: apsw.Connection, db_path: Path, *, read_only: bool) -> None:
    version = current_version(conn)
    if version > latest_version():
        raise StoreError(
            f"{db_path} has schema version {version}, newer than this kbmcp "
            f"understands ({latest_version()}); upgrade kbmcp"
        )
    mismatch = schema_mismatch(conn, version)
    if mismatch is not None:
        raise StoreError(
            f"{db_path} says it has schema version {version}, but its tables do not match that "
            f"version ({mismatch.describe()}): it was changed outside kbmcp; kbmcp does not "
            "migrate it. Restore it from a backup, or rebuild it with `kbmcp add` into a new file",
            details={"path": str(db_path), "schema_version": version},
        )
    if read_only and version < latest_version():
        raise ReadOnly(
            f"{db_path} has schema version {version} and this kbmcp needs "
            f"{latest_version()}, but the file is read-only: open it once with write access "
            "(any kbmcp command upgrades it), or use the kbmcp version that wrote it",
            details={"path": str(db_path)},
        )


def ensure_writable(conn: apsw.Connection) -> None:
    """Raise ReadOnly, naming the file, if the connection cannot write."""
    if conn.readonly("main"):
        path = conn.db_filename("main")
        raise ReadOnly(
            f"{path} is open read-only (the file or its folder is not writable): searching and "
            "reading work, changing it does not; make it writable (chmod u+w) or work on a "
            "writable copy (`kbmcp backup`)",
            details={"path": path},
        )


# How long a writer waits for another process's write transaction before giving up. Writers
# keep transactions short (ingest writes in bounded batches, docs/ingest.md), so a wait this long
# means a stuck process, not a busy one.
WRITE_WAIT_LIMIT_S = 600


def begin_writing(conn: apsw.Connection) -> None:
    """BEGIN IMMEDIATE, waiting for another process's write transaction as long as it takes (up
    to WRITE_WAIT_LIMIT_S) instead of failing with "database is locked" after the busy timeout:
    each busy timeout that passes is logged as a warning, so a waiting command says why it
    waits."""
    started = time.monotonic()
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except apsw.BusyError:
            waited = time.monotonic() - started
            path = conn.db_filename("main")
            if waited >= WRITE_WAIT_LIMIT_S:
                raise StoreError(
                    f"another process has been writing to {path} for {waited:.0f} s; kbmcp "
                    "writes in short transactions, so it may be stuck (another program "
                    "holding a transaction open?): try again, or find and stop it",
                    details={"path": path, "waited_seconds": round(waited)},
                ) from None
            logger.warning(
                "waiting for another process to finish writing to %s (%.0f s so far)",
                path,
                waited,
            )


@contextlib.contextmanager
def write_transaction(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A short write transaction. BEGIN IMMEDIATE takes the write lock up front, so two writers
    queue on the busy timeout instead of deadlocking on a read->write upgrade. On a read-only
    file it raises ReadOnly before anything starts."""
    ensure_writable(conn)
    begin_writing(conn)
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        # SQLite rolls back by itself after some errors (a full disk, an I/O error); rolling back
        # again would replace the real error with "no transaction is active".
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if is_disk_full(exc, conn.system_errno):
            raise disk_full_error(conn, exc) from None
        raise
    keep_wal_small(conn, BUSY_TIMEOUT_MS)
