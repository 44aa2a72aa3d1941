"""A full disk as one clear error instead of "unexpected FullError".

SQLite reports a full disk (or a file at its size limit) as SQLITE_FULL, which apsw raises as
`FullError`. sqlite-vec turns the SQLITE_FULL of its own inserts into a generic error whose
message is VECTOR_CHUNK_FULL (it could not add the next block of vectors to the vec0 index) or
VECTOR_WRITE_FAILED (it could not write a vector into its block).
Either way SQLite has rolled the statement back, and kbmcp's write transaction rolls back the
rest, so what the file held before is intact: the message says so, with the free space left
and, when it is known, how much the write needed.

Trap: a full disk can also come as a plain "disk I/O error" (`IOError`). SQLite grows the WAL
index (the `-shm` file, which it maps into memory) with SQLITE_IOERR_SHMSIZE when it cannot
(ENOSPC): with ~16 KiB free, opening a new file failed that way ("unexpected IOError"). That
code, or any I/O error whose system errno (`Connection.system_errno`) is ENOSPC or EDQUOT, is
a full disk too.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import apsw

from kbmcp.errors import DiskFull

VECTOR_CHUNK_FULL = "Could not insert a new vector chunk"
# sqlite-vec's message when writing a vector into its block fails; the SQLite error behind it
# (SQLITE_FULL: SQLite rolls the whole transaction back) is not passed on.
VECTOR_WRITE_FAILED = "could not write vector blob"
# vec0's default chunk: this many vectors of float32 are allocated at once (plus small bitmaps).
VEC0_CHUNK_VECTORS = 1024
SELECT_DIMENSION = "SELECT dimension FROM embedding_model WHERE id = 1"


# errno values of a full disk or an exhausted quota.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(error: BaseException, system_errno: int | None = None) -> bool:
    """Whether `error` is a full disk; `system_errno`: the connection's errno after it, when
    known (an I/O error with ENOSPC or EDQUOT)."""
    return _full_disk_error(error, system_errno) is not None


def _full_disk_error(error: BaseException, system_errno: int | None = None) -> BaseException | None:
    """`error`, or the error it was raised while handling, when that is a full disk. SQLite may
    roll the whole transaction back on SQLITE_FULL; rolling back a savepoint then fails with an
    error of its own ("no such savepoint"), which carries the full disk as its context."""
    seen: BaseException | None = error
    for _ in range(8):  # a short chain: the error, a failed rollback, a wrapper
        if seen is None:
            return None
        if (
            isinstance(seen, apsw.FullError)
            or (isinstance(seen, apsw.SQLError) and _vectors_full(str(seen)))
            or (isinstance(seen, apsw.IOError) and _out_of_space(seen, system_errno))
        ):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _vectors_full(message: str) -> bool:
    return VECTOR_CHUNK_FULL in message or VECTOR_WRITE_FAILED in message


def _out_of_space(error: apsw.IOError, system_errno: int | None) -> bool:
    return (
        getattr(error, "extendedresult", None) == apsw.SQLITE_IOERR_SHMSIZE
        or system_errno in NO_SPACE
    )


def disk_full_error(conn: apsw.Connection, error: BaseException) -> DiskFull:
    """The DiskFull error for `error` (is_disk_full) raised by a write on `conn`; call it once
    the transaction is rolled back."""
    path = conn.db_filename("main") or ":memory:"
    free = _free_bytes(path)
    full = _full_disk_error(error, conn.system_errno)
    new_block = isinstance(full, apsw.SQLError) and VECTOR_CHUNK_FULL in str(full)
    needed = _vector_chunk_bytes(conn) if new_block else None
    where = f"the disk holding {path} is full"
    if free is not None:
        where += f" ({size_text(free)} free)"
    need = f"; the vector index needed {size_text(needed)} more" if needed else ""
    return DiskFull(
        f"{where}{need}: the change was not written and nothing stored before is lost; free "
        "some space (or move the file to a larger disk) and run it again",
        details={"path": path, "free_bytes": free, "needed_bytes": needed},
    )


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


def _free_bytes(path: str) -> int | None:
    try:
        return shutil.disk_usage(Path(path).parent).free
    except OSError:
        return None


def _vector_chunk_bytes(conn: apsw.Connection) -> int | None:
    try:
        row = conn.execute(SELECT_DIMENSION).fetchone()
    except apsw.Error:
        return None
    return None if row is None else VEC0_CHUNK_VECTORS * int(row[0]) * 4
