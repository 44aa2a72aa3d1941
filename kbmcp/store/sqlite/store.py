"""The store contract (kbmcp/store/backend.py) on one SQLite file."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import apsw

from kbmcp.errors import KbError, StoreError
from kbmcp.store.sqlite import (
    admin,
    audit,
    catalog,
    connection,
    disk_full,
    evaluation,
    grants,
    id_key,
    index,
    ingest,
    listing,
    memories,
    new_file,
    reads,
    reembed,
    scan,
    search,
    transfer,
    vectors,
    wal,
)

if TYPE_CHECKING:
    from kbmcp.store.admin import Admin
    from kbmcp.store.audit import Audit
    from kbmcp.store.catalog import Catalog
    from kbmcp.store.evaluation import Evaluation
    from kbmcp.store.grants import Grants
    from kbmcp.store.id_key import IdKeys
    from kbmcp.store.index import Index
    from kbmcp.store.ingest import Ingest
    from kbmcp.store.listing import Listing
    from kbmcp.store.memories import Memories
    from kbmcp.store.reads import Reads
    from kbmcp.store.reembed import Reembed
    from kbmcp.store.scan import Scan
    from kbmcp.store.search import Search
    from kbmcp.store.transfer import Transfer
    from kbmcp.store.vectors import Vectors

logger = logging.getLogger(__name__)

# Failures of the file itself, not of one document's data.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    KbError,
    apsw.FullError,
    apsw.IOError,
    apsw.BusyError,
    apsw.LockedError,
    apsw.ReadOnlyError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.CantOpenError,
    apsw.InterruptError,
    apsw.NoMemError,
)


class SqliteStore:
    kind: Literal["sqlite"] = "sqlite"
    database_errors = DATABASE_ERRORS
    driver_errors: tuple[type[BaseException], ...] = (apsw.Error,)
    closes_idle_connections = False  # an open file costs nothing while idle

    # The concerns (kbmcp/store/backend.py): this backend's implementation of each.
    admin: Admin = admin
    audit: Audit = audit.AUDIT
    catalog: Catalog = catalog.CATALOG
    evaluation: Evaluation = evaluation
    grants: Grants = grants.GRANTS
    id_key: IdKeys = id_key.ID_KEYS
    index: Index = index
    ingest: Ingest = ingest.INGEST
    listing: Listing = listing.LISTING
    memories: Memories = memories.MEMORIES
    vectors: Vectors = vectors
    reads: Reads = reads.READS
    reembed: Reembed = reembed
    scan: Scan = scan.SCAN
    search: Search = search
    transfer: Transfer = transfer.TRANSFER

    def __init__(self, path: Path, *, immutable: bool = False) -> None:
        self.path = path
        self.immutable = immutable
        self.shown = str(path)
        self._writes = threading.local()
        self._created = False  # the file did not exist before this store's first connection

    def connect(self, *, create: bool = False, migrate: bool = False) -> apsw.Connection:
        existed = self.path.exists()
        conn = connection.open_connection(
            self.path, create=create, apply_migrations=migrate, immutable=self.immutable
        )
        self._created = self._created or not existed
        return conn

    def remove_if_created_and_empty(self) -> bool:
        return self._created and new_file.remove_if_empty(self.path)

    def usable(self, conn: apsw.Connection) -> bool:
        return True  # a file does not go away under an open connection

    def in_transaction(self, conn: apsw.Connection) -> bool:
        return bool(conn.in_transaction)

    def abandon(self, conn: apsw.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def close(self, conns: Sequence[apsw.Connection]) -> None:
        """Fold the WAL into the file, then close. The last connection to the file (of any
        process) removes the -wal and -shm files; if another process still has it open, the
        checkpoint leaves the -wal empty."""
        if conns:
            wal.checkpoint(conns[0], connection.BUSY_TIMEOUT_MS)
        for conn in conns:
            try:
                conn.close()
            except apsw.Error as exc:  # in use by a thread still finishing a request
                logger.warning("closing a connection to %s: %s", self.shown, exc)

    def write_transaction(
        self, conn: apsw.Connection
    ) -> contextlib.AbstractContextManager[apsw.Connection]:
        self._writes.begun = self.writes_begun() + 1
        return connection.write_transaction(conn)

    def writes_begun(self) -> int:
        return int(getattr(self._writes, "begun", 0))

    def lost_connection(self, error: BaseException, *, during_write: bool) -> StoreError:
        # Never asked: a file does not go away under an open connection (`usable`).
        return StoreError(f"lost the connection to {self.shown} ({error})")

    @contextlib.contextmanager
    def read_snapshot(self, conn: apsw.Connection) -> Iterator[None]:
        """BEGIN ... COMMIT: in WAL mode a read transaction sees one snapshot and never blocks
        or is blocked by a writer."""
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def savepoint(self, conn: apsw.Connection) -> Iterator[None]:
        with conn:  # apsw: a SAVEPOINT, released at the end, rolled back on an exception
            yield

    def is_read_only(self, conn: apsw.Connection) -> bool:
        return bool(conn.readonly("main"))

    def ensure_writable(self, conn: apsw.Connection) -> None:
        connection.ensure_writable(conn)

    def is_disk_full(self, error: BaseException) -> bool:
        return disk_full.is_disk_full(error)

    def is_constraint_violation(self, error: BaseException) -> bool:
        return isinstance(error, apsw.ConstraintError)
