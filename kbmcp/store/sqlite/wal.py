"""Keeping the WAL small while the file is in use, and folding it in when the file is closed.

SQLite copies the WAL into the file every 1000 pages (a PASSIVE checkpoint), but it can only
start the WAL over from its beginning when no reader still uses an older snapshot. Servers
that search without pause always have such a reader, so a WAL written by `remember`, `watch`
or `add` grew without end (2.3x the file under continuous search and ingest), and its file
never shrank even when it did restart. Two measures bound it:
- `journal_size_limit`: when the WAL restarts, its file is cut back to WAL_SIZE_LIMIT;
- `keep_wal_small`, after each write transaction: once the WAL is past WAL_SIZE_LIMIT, a
  TRUNCATE checkpoint briefly holds new writers back, lets the readers of older snapshots
  finish (waiting CHECKPOINT_TIMEOUT_MS at most), copies everything and empties the WAL. If a
  long reader prevents it, it is tried again RETRY_SECONDS later, not on every commit.
"""

from __future__ import annotations

import os
import threading
import time

import apsw

WAL_SIZE_LIMIT = 32 * 1024 * 1024
CHECKPOINT_TIMEOUT_MS = 1_000  # how long a checkpoint waits for readers and writers at most
RETRY_SECONDS = 10.0
SELECT_JOURNAL_MODE = "PRAGMA journal_mode"
TRUNCATE_CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"

_last_attempt: dict[str, float] = {}  # per file: when a TRUNCATE checkpoint last failed
_attempts_lock = threading.Lock()


def keep_wal_small(conn: apsw.Connection, busy_timeout_ms: int) -> None:
    """After a commit: empty the WAL if it has grown past WAL_SIZE_LIMIT (see the module).
    `busy_timeout_ms`: the connection's usual busy timeout, restored afterwards."""
    path = conn.db_filename("main")
    if not path:
        return
    try:
        size = os.stat(f"{path}-wal").st_size
    except OSError:
        return
    if size <= WAL_SIZE_LIMIT:
        return
    with _attempts_lock:
        if time.monotonic() - _last_attempt.get(path, float("-inf")) < RETRY_SECONDS:
            return
        _last_attempt[path] = time.monotonic()
    result = checkpoint(conn, busy_timeout_ms)
    if result is not None and result[0] == 0:
        with _attempts_lock:
            _last_attempt.pop(path, None)


def checkpoint(conn: apsw.Connection, busy_timeout_ms: int) -> tuple[int, int, int] | None:
    """Copy the WAL into the file and truncate it to zero bytes (`wal_checkpoint(TRUNCATE)`),
    waiting at most CHECKPOINT_TIMEOUT_MS for other connections' readers and writers. Returns
    SQLite's (busy, frames in the WAL, frames copied), or None when there is nothing to do (a
    read-only or rollback-journal file) or it failed. A checkpoint that cannot finish is
    harmless: the WAL keeps everything, and a later one continues. The connection's busy
    timeout is set back to `busy_timeout_ms` afterwards."""
    if conn.readonly("main") or conn.execute(SELECT_JOURNAL_MODE).fetchone()[0] != "wal":
        return None
    conn.set_busy_timeout(CHECKPOINT_TIMEOUT_MS)
    try:
        busy, frames, copied = conn.execute(TRUNCATE_CHECKPOINT).fetchone()
    except apsw.Error:
        return None
    finally:
        conn.set_busy_timeout(busy_timeout_ms)
    return int(busy), int(frames), int(copied)
