"""A large scope's two channels at once: the vector half on a second connection that shares the
search's snapshot, the keyword half on the search's own.

Why: a 10% scope's channels statement (100k chunks, 10,000 in scope) ran its two independent
halves one after the other in one backend, the keyword postings (~9-10 ms) then the exact scan
of 10,000 vectors (~10-11 ms), with the machine's second core idle. Two backends run them in
parallel. The second connection reads the same data as the first: the search's transaction
exports its snapshot (`pg_export_snapshot()`), and the helper's transaction, in one pipelined
round trip, begins, adopts it (`SET TRANSACTION SNAPSHOT`), runs the vector statement and
commits. The extra round trips (the export, the helper's) and the thread cost ~0.5 ms, so only
scopes of at least HALVES_MIN_ROWS chunks use it, and only when both channels run.

The helper connection is opened on first use beside the connection it serves and kept with it
(one per kbmcp connection for the vector half, closed with it: `close_helper`; a search over
several stores on Citus asks for up to three, `helpers`, for its per-store statements:
shards.py). On a server in recovery (a hot
standby) the search stays one statement, as before: snapshot export there (PostgreSQL 10 and
later) is not tested here. On a Citus coordinator too (`shares_snapshots`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from kbmcp.store.postgres import citus

PgConnection = psycopg.Connection[Any]
Mine = TypeVar("Mine")
Theirs = TypeVar("Theirs")

# Scopes from this many chunks run their channels on two connections (below, the extra round
# trips cost more than the overlap saves: bench/search.py, docs/scale-out.md).
HALVES_MIN_ROWS = 5_000

EXPORT_SNAPSHOT = "SELECT pg_export_snapshot()"
IN_RECOVERY = "SELECT pg_is_in_recovery()"
BEGIN_SHARED = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
ADOPT_SNAPSHOT = "SET TRANSACTION SNAPSHOT {}"

# The URL each kbmcp connection was opened with (connection.connect records it), the helpers
# opened beside it (the first serves the vector half; a search over several stores on Citus
# uses more: shards.py), and whether its server can export snapshots.
_urls: weakref.WeakKeyDictionary[PgConnection, str] = weakref.WeakKeyDictionary()
_helpers: weakref.WeakKeyDictionary[PgConnection, list[PgConnection]] = weakref.WeakKeyDictionary()
_exports: weakref.WeakKeyDictionary[PgConnection, bool] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def remember_url(conn: PgConnection, url: str) -> None:
    _urls[conn] = url


def worth_two(conn: PgConnection, scope_rows: int | None, both_channels: bool) -> bool:
    """Run this search's channels on two connections (see the module docstring)."""
    if scope_rows is None or scope_rows < HALVES_MIN_ROWS or not both_channels:
        return False
    if not can_open_helpers(conn):  # not opened by connection.connect (no URL to open one)
        return False
    exports = _exports.get(conn)
    if exports is None:
        exports = _exports[conn] = shares_snapshots(conn)
    return exports


def shares_snapshots(conn: PgConnection) -> bool:
    """Whether a second connection can read this connection's snapshot: not on a server in
    recovery (untested here), and not on a Citus coordinator, where the exported snapshot is
    the coordinator's own and does not reach the workers' transactions."""
    return not conn.execute(IN_RECOVERY).fetchone()[0] and not citus.is_citus(conn)


def run_halves(
    conn: PgConnection,
    own: Callable[[], list[tuple[Any, ...]]],
    other_sql: str,
    params: dict[str, Any],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(rows of `own()` on `conn`, rows of `other_sql` on the helper connection), run at the
    same time in `conn`'s open transaction's snapshot."""
    snapshot = conn.execute(EXPORT_SNAPSHOT).fetchone()[0]
    mine, (other,) = run_beside(
        conn, own, [lambda helper: _in_snapshot(helper, snapshot, other_sql, params)]
    )
    return mine, other


def run_beside(
    conn: PgConnection,
    own: Callable[[], Mine],
    tasks: Sequence[Callable[[PgConnection], Theirs]],
) -> tuple[Mine, list[Theirs]]:
    """`own()` on the calling thread while each task runs on a helper connection of its own
    beside `conn` (`helpers`), in a thread: (own's result, the tasks' results in order). A
    task's failure closes the helpers (a transaction may be left open on one: never reuse it)
    and is raised once every task has ended."""
    beside = helpers(conn, len(tasks))
    results: list[Any] = [None] * len(tasks)
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        try:
            results[slot] = tasks[slot](beside[slot])
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(slot,), name="kbmcp-search-helper",
                                daemon=True) for slot in range(len(tasks))]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        mine = own()
    finally:
        for thread in threads:
            thread.join()
    if errors:
        close_helper(conn)
        raise errors[0]
    return mine, results


def _in_snapshot(
    helper: PgConnection, snapshot: str, statement: str, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """One round trip: begin, adopt the snapshot, run the statement, commit."""
    with helper.pipeline():
        helper.execute(BEGIN_SHARED)
        helper.execute(sql.SQL(ADOPT_SNAPSHOT).format(sql.Literal(snapshot)))
        cursor = helper.cursor(binary=True)
        cursor.execute(statement, params, prepare=False)
        rows = cursor.fetchall()
        helper.execute("COMMIT")
    return rows


def can_open_helpers(conn: PgConnection) -> bool:
    """Whether `conn` was opened by connection.connect (its URL opens helpers)."""
    return conn in _urls


def helpers(conn: PgConnection, count: int) -> list[PgConnection]:
    """`count` idle helper connections beside `conn`, opened as needed (a helper left unusable
    or inside a transaction is replaced)."""
    from kbmcp.store.postgres.connection import connect

    with _lock:
        kept = _helpers.setdefault(conn, [])
        for slot in range(count):
            if slot < len(kept) and _idle(kept[slot]):
                continue
            if slot < len(kept):
                kept[slot].close()
                kept[slot] = connect(_urls[conn], migrate=False)
            else:
                kept.append(connect(_urls[conn], migrate=False))
        return kept[:count]


def _idle(helper: PgConnection) -> bool:
    return (
        not helper.closed
        and not helper.broken
        and helper.info.transaction_status == TransactionStatus.IDLE
    )


def close_helper(conn: PgConnection) -> None:
    """Close the helper connections opened beside `conn`, if any."""
    with _lock:
        kept = _helpers.pop(conn, [])
    for helper in kept:
        helper.close()


def helpers_of(conns: Sequence[PgConnection]) -> list[PgConnection]:
    """The open helper connections of these connections (for tests)."""
    return [h for c in conns for h in _helpers.get(c, []) if not h.closed]
