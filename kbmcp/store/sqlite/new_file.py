"""A knowledge-base file kbmcp created is complete or absent.

A new file gets its tables in one transaction; when that fails (a full disk), or when the
command that created it fails before anything was added (the first `kbmcp add` on a nearly full
disk), the file is removed with its `-wal` and `-shm`, rather than left for `doctor` and the
next command to trip over (a 4 KiB header with a `-shm`, or an empty knowledge base).

Only a file that holds nothing, and that no other connection has open, is removed. Both are
checked under an exclusive lock: a connection in exclusive locking mode (which keeps the WAL
index in its own memory, so it needs no room on the disk for the `-shm`) takes the file's
exclusive lock at once or not at all (no busy timeout), and fails while any other connection,
of any process, has the WAL-mode file open. The files are unlinked while that lock is held, so
no one else can be using them; a process that opens the path afterwards starts a new file.
Trap: a file not yet in WAL mode (0 bytes, or a header written before the disk filled) needs a
rollback journal for that lock, which a full disk has no room for; such a file holds no tables,
so it is removed when the lock fails for want of room (SQLITE_FULL), and kept when it fails
because another connection holds it (SQLITE_BUSY).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import apsw

from kbmcp.store.sqlite.files import COMPANIONS

logger = logging.getLogger(__name__)

ANY_SCHEMA = "SELECT EXISTS (SELECT 1 FROM sqlite_schema)"
HAS_DOCUMENT_TABLE = "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'document')"
# Documents and memories alike (a memory is a document of a memory store).
ANY_DOCUMENT = "SELECT EXISTS (SELECT 1 FROM document)"


def remove_if_empty(db_path: Path) -> bool:
    """Remove `db_path` (and its -wal and -shm) when it holds no document or memory (no tables
    at all, or a knowledge base with nothing in it yet) and no other connection has it open;
    whether it was removed. Never raises: a file that cannot be checked is kept."""
    if not db_path.exists():
        return False
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        return False
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
        try:
            conn.execute("BEGIN EXCLUSIVE")  # fails (BusyError) while anyone else has it open
        except apsw.BusyError:
            return False
        except apsw.FullError:
            # Not in WAL mode yet (a header, or nothing): the lock needs a rollback journal, and
            # there is no room for one. Nothing is in the file to lose; it is removed if empty.
            pass
        if not _holds_nothing(conn):
            return False
        for suffix in COMPANIONS:
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        logger.info("removed %s: it was created by this command and holds nothing", db_path)
        return True
    except (apsw.Error, OSError):
        return False
    finally:
        # (On a file just unlinked this may fail to fold a WAL into it: nothing is lost.)
        with contextlib.suppress(apsw.Error):
            conn.close()


def _holds_nothing(conn: apsw.Connection) -> bool:
    if not conn.execute(ANY_SCHEMA).fetchone()[0]:
        return True  # no tables: a header, or a migration that did not commit
    if not conn.execute(HAS_DOCUMENT_TABLE).fetchone()[0]:
        return False  # tables, but not kbmcp's: never ours to remove
    return not conn.execute(ANY_DOCUMENT).fetchone()[0]
