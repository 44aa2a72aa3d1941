"""A workspace's connections: one per thread that uses it, reused, replaced and closed when idle.

Every thread that uses the workspace holds its own connection while it lives (its lease), so a
server's requests run in parallel. Threads come and go (the servers' worker threads expire
after 10 s idle), connections do not: a thread that needs one takes over the lease of a thread
that has ended, and only opens a new connection when every lease belongs to a live thread. So a
process never holds more connections than it had threads using the workspace at one time.
A connection the database server dropped is replaced at the thread's next use.

Idle connections (`close_idle_after`, used by the servers on PostgreSQL): to a PostgreSQL server
an open connection is a session, and a *smart* shutdown (SIGTERM) waits for every session to
end, so connections a server keeps for its next request kept the database from ever shutting
down. Once asked, a background thread closes every connection idle longer than the given time.
A connection counts as idle when its thread has ended, or when its thread is between requests:
a request (`check_out` ... `check_in`, `Workspace.run_request`) marks it busy then idle again,
and any other use of the connection (`conn`) marks it busy until the next `check_in`, so a
connection handed out outside a request is never closed under its user. A closed connection is
replaced when its thread next needs one, like a dropped one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbmcp.config import seconds_from_env
from kbmcp.store.backend import Connection, Store

logger = logging.getLogger(__name__)

IDLE_ENV = "KBMCP_POSTGRES_IDLE_SECONDS"
# A server's connections idle this long are closed (PostgreSQL): a smart shutdown of the
# database completes within about this time, and a request after a quiet spell pays one new
# connection (a few milliseconds).
DEFAULT_IDLE_SECONDS = 30.0


def idle_seconds_from_env(environ: Mapping[str, str] | None = None) -> float:
    """IDLE_ENV (seconds > 0) or the default."""
    return seconds_from_env(IDLE_ENV, DEFAULT_IDLE_SECONDS, environ)


@dataclass
class Lease:
    """A connection and the thread it belongs to until that thread ends."""

    conn: Connection
    thread: threading.Thread
    busy: bool = True  # handed out and not checked in since
    requests: int = 0  # requests of its thread running (nested ones count)
    idle_since: float = field(default_factory=time.monotonic)


class ConnectionLeases:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._local = threading.local()
        self._leases: list[Lease] = []
        self._lock = threading.Lock()
        self._closer: threading.Thread | None = None
        self._closing = threading.Event()

    # ------------------------------------------------------------------ this thread's connection

    def add(self, conn: Connection) -> Connection:
        """Make `conn` this thread's connection (the workspace's first one)."""
        with self._lock:
            self._local.lease = self._register(conn)
        return conn

    def conn(self) -> Connection:
        """This thread's connection: its lease's, one taken over from an ended thread, or a
        new one. Marked busy until the next `check_in`."""
        lease: Lease | None = getattr(self._local, "lease", None)
        if lease is not None:
            with self._lock:
                lease.busy = True
            if self.store.usable(lease.conn):  # (closed when idle, or dropped by the server)
                return lease.conn
            self.drop(lease)
        lease = self._take_over() or self._new()
        self._local.lease = lease
        return lease.conn

    def current(self) -> Lease | None:
        """This thread's lease, if it has one (its connection may be closed by now)."""
        return getattr(self._local, "lease", None)

    def current_requests(self) -> int:
        """How many requests this thread is running (nested ones count)."""
        return int(getattr(self._local, "requests", 0))

    def check_out(self) -> None:
        """A request starts on this thread (see `check_in`)."""
        self._local.requests = getattr(self._local, "requests", 0) + 1

    def check_in(self) -> None:
        """A request ends on this thread: its connection is idle until the next use (the
        outermost request of nested ones decides)."""
        self._local.requests -= 1
        lease = self.current()
        if self._local.requests == 0 and lease is not None:
            with self._lock:
                lease.busy = False
                lease.idle_since = time.monotonic()

    def release(self) -> None:
        """This thread is done with its connection until it next asks for one (a server's
        main thread after starting up, a watch between syncs)."""
        self._local.requests = 1
        self.check_in()

    def drop(self, lease: Lease) -> None:
        """Forget (and close) a lease whose connection can no longer be used."""
        with self._lock:
            self._leases = [held for held in self._leases if held is not lease]
        self.store.close([lease.conn])

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._leases)

    def _register(self, conn: Connection) -> Lease:
        lease = Lease(conn, threading.current_thread())
        self._leases.append(lease)
        return lease

    def _new(self) -> Lease:
        conn = self.store.connect()
        with self._lock:
            return self._register(conn)

    def _take_over(self) -> Lease | None:
        """The lease of a thread that has ended, now this thread's; None if every lease belongs
        to a live thread. A thread that has ended runs no more code, so nothing else can be
        using its connection."""
        while True:
            with self._lock:
                lease = next((held for held in self._leases if not held.thread.is_alive()), None)
                if lease is None:
                    return None
                lease.thread = threading.current_thread()
                lease.busy = True
            # Never expected (write_transaction always ends what it began), but a transaction
            # left open by a dead thread must not leak into this thread's first call.
            self.store.abandon(lease.conn)
            if self.store.usable(lease.conn):
                return lease
            self.drop(lease)  # closed by `abandon`, by the idle closer, or by the server

    # ------------------------------------------------------------------ idle connections

    def close_idle_after(self, seconds: float) -> None:
        """From now on, close connections idle for `seconds` (checked every quarter of that,
        at most every 15 s). Once per workspace; `close_all` stops it."""
        if self._closer is not None:
            return
        interval = min(max(seconds / 4, 0.05), 15.0)

        def close_idle_ones() -> None:
            while not self._closing.wait(interval):
                self.close_idle(seconds)

        self._closer = threading.Thread(
            target=close_idle_ones, name="kbmcp-idle-connections", daemon=True
        )
        self._closer.start()

    def close_idle(self, seconds: float) -> int:
        """Close the connections idle for `seconds` or more; how many. Under the lock that
        `conn` takes to mark a connection busy, so none is closed as it is handed out."""
        now = time.monotonic()
        with self._lock:
            idle = [
                lease
                for lease in self._leases
                if (not lease.busy or not lease.thread.is_alive())
                and now - lease.idle_since >= seconds
                and not self.store.in_transaction(lease.conn)
            ]
            self._leases = [lease for lease in self._leases if lease not in idle]
            self.store.close([lease.conn for lease in idle])
        if idle:
            logger.debug("closed %d connections idle for %.0f s or more", len(idle), seconds)
        return len(idle)

    def close_all(self) -> None:
        """Stop closing idle connections and close every connection."""
        self._closing.set()
        if self._closer is not None and self._closer is not threading.current_thread():
            self._closer.join(timeout=10)
        with self._lock:
            leases, self._leases = self._leases, []
        self.store.close([lease.conn for lease in leases])
