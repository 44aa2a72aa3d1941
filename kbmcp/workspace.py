"""A workspace: the open store, the configured embedder and settings, shared by every service call.

The CLI opens one per command; the MCP server opens one for its lifetime. `long_lived` says
which: on an SQLite file a long-lived workspace holds the search accelerators
(kbmcp/store/sqlite/search/accelerator.py: every vector in memory, per-term bm25 contributions,
tokenised chunks) that pay off over many queries; a one-shot one (the default) holds none and
answers from SQL alone (vec0, FTS5) instead of paying a fill of ~0.5-2 s at 100k chunks for a
single query (docs/search.md). On PostgreSQL every search reads the database: no process keeps
a copy that another server's writes could make stale (the tokens kept for excerpts are keyed by
the text they were computed from, which each search reads anew).

The store (kbmcp/store/backend.py) is an SQLite file or a PostgreSQL database, opened from
`settings.db`; services reach it through `workspace.store` and `workspace.conn`.

Connections (kbmcp/leases.py): every thread that uses the workspace holds its own connection
to the database while it lives, so a server's requests run in parallel: in WAL mode (and on
PostgreSQL) readers never wait for each other nor for a writer. Writes take `lock`, so a process
has one writer at a time (other processes queue on SQLite's busy timeout, or on PostgreSQL's
row locks); reads take no lock. A process never holds more connections than it had threads
using the workspace at one time; all are closed with the workspace, and a server on PostgreSQL
closes those idle for a while (`close_idle_connections`).

A request of a server (a tool call, a token check) runs through `run_request`: when the database
server dropped the thread's connection (a restart, a failover: the first statement fails), a
request that has written nothing is made again, once, on a new connection, and one that began a
write is not (it may have been written) but reported as one clear `store_error`; while the
server is down, every request gets `cannot connect to PostgreSQL at …`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from kbmcp.access import Principal, local_principal
from kbmcp.config import Settings
from kbmcp.embed.base import Embedder
from kbmcp.embed.registry import create_embedder
from kbmcp.leases import ConnectionLeases
from kbmcp.store.backend import Connection, Store
from kbmcp.store.open_store import open_store

if TYPE_CHECKING:
    from kbmcp.search.text_tokens import TextTokenCache

logger = logging.getLogger(__name__)
R = TypeVar("R")


class Workspace:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        create: bool = True,
        long_lived: bool = False,
    ) -> None:
        """Open the database (`create=False`: a missing file or an empty database is an error
        instead of a new knowledge base). `long_lived`: the process serves many queries (server,
        eval, bench), so search may fill in-memory caches; otherwise it uses them only if
        already warm."""
        self.settings = settings
        self.store: Store = open_store(settings)
        # The search accelerators of a long-lived process (an SQLite store's; None on PostgreSQL,
        # whose every search reads the database).
        self.accelerator: Any | None = None
        # A long-lived process's tokens of the texts its searches returned, on either backend
        # (kbmcp/search/text_tokens.py: keyed by each text's length and hash, so never stale).
        self.text_tokens: TextTokenCache | None = None
        self._long_lived = False
        self.long_lived = long_lived
        self._leases = ConnectionLeases(self.store)
        # The first connection creates and migrates the database; the others only open it.
        self._leases.add(self.store.connect(create=create, migrate=True))
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self._embedder_wraps: list[Callable[[Embedder], Embedder]] = []
        # The process's writer lock: service functions that write hold it while they use the
        # connection (and never while they embed), so one thread writes at a time.
        self.lock = threading.RLock()
        # What must run while the connections are still open (`before_close`).
        self._before_close: list[Callable[[], None]] = []

    @property
    def conn(self) -> Connection:
        """This thread's connection to the database (only store functions use what it is)."""
        return self._leases.conn()

    @property
    def connection_count(self) -> int:
        """How many connections to the database the workspace holds open."""
        return self._leases.count

    def run_request(self, produce: Callable[[], R]) -> R:
        """`produce()`, one request of a server (a tool call, a token check), on this thread's
        connection, which is idle again afterwards (`close_idle_connections`).

        A connection the database server dropped (a restart, a failover) fails the request's
        first statement; the request is then made again, once, on a new connection, unless it
        began a write: that one may have been written, so it is never made twice but reported
        as a StoreError. A database that cannot be reached is the StoreError of connecting
        (`cannot connect to PostgreSQL at …`). Nested requests run as part of the outer one."""
        self._leases.check_out()
        try:
            if self._leases.current_requests() > 1:
                return produce()
            return self._made_again_if_lost(produce)
        finally:
            self._leases.check_in()

    def _made_again_if_lost(self, produce: Callable[[], R]) -> R:
        store = self.store
        writes = store.writes_begun()
        try:
            return produce()
        except store.driver_errors as error:
            if not self._lost_connection():
                raise
            if store.writes_begun() != writes:
                raise store.lost_connection(error, during_write=True) from None
            logger.warning(
                "the connection to %s was lost (%s): making the request again on a new one",
                store.shown,
                _first_line(error),
            )
        try:
            return produce()
        except store.driver_errors as error:
            if not self._lost_connection():
                raise
            wrote = store.writes_begun() != writes
            raise store.lost_connection(error, during_write=wrote) from None

    def _lost_connection(self) -> bool:
        """Whether this thread's connection is gone (closed, or broken by the server)."""
        lease = self._leases.current()
        return lease is not None and not self.store.usable(lease.conn)

    def close_idle_connections(self, seconds: float) -> None:
        """From now on, close connections idle for `seconds` (kbmcp/leases.py), on a database
        where an idle connection holds something (a PostgreSQL server's session, which a smart
        shutdown waits for); this thread's connection is idle from now on too."""
        if self.store.closes_idle_connections:
            self._leases.close_idle_after(seconds)
        self._leases.release()

    def release_connection(self) -> None:
        """This thread is done with its connection until it next needs one (a watch between
        syncs): it may be closed when idle (`close_idle_connections`)."""
        self._leases.release()

    @property
    def long_lived(self) -> bool:
        return self._long_lived

    @long_lived.setter
    def long_lived(self, value: bool) -> None:
        self._long_lived = value
        if not value:
            self.accelerator = None
            self.text_tokens = None
            return
        # Made here, not per command: both need numpy, which a one-shot command never loads.
        if self.accelerator is None:
            self.accelerator = self.store.search.new_accelerator()
        if self.text_tokens is None:
            from kbmcp.search.text_tokens import TextTokenCache

            self.text_tokens = TextTokenCache()

    @property
    def embedder(self) -> Embedder:
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = create_embedder(self.settings.embedder)
                for wrap in self._embedder_wraps:
                    self._embedder = wrap(self._embedder)
            return self._embedder

    def wrap_embedder(self, wrap: Callable[[Embedder], Embedder]) -> None:
        """Put `wrap(embedder)` in the embedder's place (now, or when it is made): e.g. timing
        every call for /metrics without loading the model before it is needed."""
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder_wraps.append(wrap)
            else:
                self._embedder = wrap(self._embedder)

    def local_principal(self) -> Principal:
        return local_principal(self.store, self.conn, self.lock)

    def ensure_model(self) -> None:
        """Check that the file's vectors come from the configured embedder, recording it on first
        use. Raises ModelMismatch (naming `kbmcp reembed`) otherwise."""
        fingerprint = self.embedder.fingerprint
        store, conn = self.store, self.conn
        if store.vectors.check_model(conn, fingerprint) or store.is_read_only(conn):
            # Recorded already; or a read-only database without a model, which has no vectors
            # to check (nor room to record one).
            return
        with self.lock, store.write_transaction(conn):
            if not store.vectors.check_model(conn, fingerprint):
                store.vectors.record_model(conn, fingerprint)

    def before_close(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the workspace closes, before its connections do (e.g. the audit
        trail writing what it holds)."""
        self._before_close.append(callback)

    def close(self) -> None:
        """Close every connection (on SQLite, the WAL is folded into the file first)."""
        callbacks, self._before_close = self._before_close, []
        for callback in callbacks:
            callback()
        self._leases.close_all()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


P = ParamSpec("P")


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def holding_lock(
    function: Callable[Concatenate[Workspace, P], R],
) -> Callable[Concatenate[Workspace, P], R]:
    """Run a service function that writes while holding its workspace's writer lock.

    The rule: a service function that writes holds the lock while it uses the connection, and
    nothing slow (such as embedding) happens while it is held; one that only reads takes no lock
    (each thread reads through its own connection). Adapters (CLI, MCP tools) never take it.
    """

    @functools.wraps(function)
    def locked(workspace: Workspace, *args: P.args, **kwargs: P.kwargs) -> R:
        with workspace.lock:
            return function(workspace, *args, **kwargs)

    return locked
