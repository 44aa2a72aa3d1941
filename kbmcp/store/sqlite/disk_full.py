"""A full disk as one clear error instead of "unexpected FullError".

SQLite reports a full disk (or a file at its size limit) as SQLITE_FULL, which apsw raises as
`FullError`. sqlite-vec turns the SQLITE_FULL of its own inserts into a generic error whose
message is VECTOR_CHUNK_FULL: it could not add the next block of vectors to the vec0 index.
Either way SQLite has rolled the statement back, and kbmcp's write transaction rolls back the
rest, so what the file held before is intact: the message says so, with the free space left
and, when it is known, how much the write needed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw

from kbmcp.errors import DiskFull

VECTOR_CHUNK_FULL = "Could not insert a new vector chunk"
# vec0's default chunk: this many vectors of float32 are allocated at once (plus small bitmaps).
VEC0_CHUNK_VECTORS = 1024
SELECT_DIMENSION = "SELECT dimension FROM embedding_model WHERE id = 1"


def is_disk_full(error: BaseException) -> bool:
    return _full_disk_error(error) is not None


def _full_disk_error(error: BaseException) -> BaseException | None:
    """`error`, or the error it was raised while handling, when that is a full disk. SQLite may
    roll the whole transaction back on SQLITE_FULL; rolling back a savepoint then fails with an
    error of its own ("no such savepoint"), which carries the full disk as its context."""
    seen: BaseException | None = error
    for _ in range(8):  # a short chain: the error, a failed rollback, a wrapper
        if seen is None:
            return None
        if isinstance(seen, apsw.FullError) or (
            isinstance(seen, apsw.SQLError) and VECTOR_CHUNK_FULL in str(seen)
        ):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def disk_full_error(conn: apsw.Connection, error: BaseException) -> DiskFull:
    """The DiskFull error for `error` (is_disk_full) raised by a write on `conn`; call it once
    the transaction is rolled back."""
    path = conn.db_filename("main") or ":memory:"
    free = _free_bytes(path)
    vectors_full = isinstance(_full_disk_error(error), apsw.SQLError)
    needed = _vector_chunk_bytes(conn) if vectors_full else None
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
