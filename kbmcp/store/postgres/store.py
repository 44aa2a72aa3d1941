"""The store contract (kbmcp/store/backend.py) on a PostgreSQL database.

Connections are psycopg connections in autocommit mode: a statement outside a transaction
commits alone (a read sees the latest commits), and a write names its transaction. The
workspace keeps one per live thread, as on SQLite: a bounded, leased set (no more than the
threads that used the workspace at one time), reused when threads end and replaced when the
server drops one. The database serialises writers; `Workspace.lock` stays a process lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from kbmcp.errors import DiskFull, KbError, ReadOnly, StoreError
from kbmcp.store.postgres import (
    admin,
    audit,
    catalog,
    connection,
    evaluation,
    grants,
    halves,
    id_key,
    index,
    ingest,
    listing,
    memories,
    migrations,
    reads,
    reembed,
    scan,
    search,
    transfer,
    vectors,
)
from kbmcp.store.postgres.url import shown_url

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

PgConnection = psycopg.Connection[Any]

# The first tables of the schema, found when the database is someone else's.
SELECT_TABLES = """
SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
ORDER BY table_name
LIMIT 5
"""
# A hot standby, a read-only default, or a role that may not write: writes will be refused.
SELECT_READ_ONLY = """
SELECT pg_is_in_recovery()
    OR current_setting('transaction_read_only')::boolean
    OR NOT has_table_privilege('knowledge_base', 'INSERT')
"""

# Failures of the database or the connection, not of one document's data. A lost connection,
# a cancelled statement, a full disk, a deadlock or serialisation failure are all
# OperationalError.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    KbError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    pg_errors.InsufficientPrivilege,
    pg_errors.ReadOnlySqlTransaction,
)


class PostgresStore:
    kind: Literal["postgres"] = "postgres"
    database_errors = DATABASE_ERRORS
    driver_errors: tuple[type[BaseException], ...] = (psycopg.Error,)
    closes_idle_connections = True

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

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = shown_url(url)
        self._writes = threading.local()

    def connect(self, *, create: bool = False, migrate: bool = False) -> PgConnection:
        conn = connection.connect(self.url, migrate=False)
        try:
            if migrations.current_version(conn) == 0:
                self._check_new(conn, create=create)
            if migrate and migrations.migrate(conn):
                vectors.register_vector(conn)  # the type exists now (a new database)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_new(self, conn: PgConnection, *, create: bool) -> None:
        """A database without kbmcp's schema: another application's is refused, an empty one
        becomes a knowledge base only when the caller may create one."""
        tables = [row[0] for row in conn.execute(SELECT_TABLES)]
        if tables:
            raise StoreError(
                f"the PostgreSQL database {self.shown} holds tables of another application "
                f"({', '.join(tables)}), not a kbmcp knowledge base; kbmcp does not write into "
                "it: create a database for kbmcp, or point --db / KBMCP_DB at another one",
                details={"db": self.shown},
            )
        if not create:
            raise StoreError(
                f"the PostgreSQL database {self.shown} is empty, not a knowledge base yet: add "
                "documents with `kbmcp add PATH`, copy a file into it with `kbmcp copy FILE "
                "URL`, or point --db / KBMCP_DB at another database",
                details={"db": self.shown},
            )

    def remove_if_created_and_empty(self) -> bool:
        return False  # the database existed before kbmcp (its schema is kbmcp's to keep)

    def usable(self, conn: PgConnection) -> bool:
        return not (conn.closed or conn.broken)

    def in_transaction(self, conn: PgConnection) -> bool:
        return conn.info.transaction_status != TransactionStatus.IDLE

    def abandon(self, conn: PgConnection) -> None:
        """A connection left inside a transaction cannot be trusted (psycopg forbids rolling
        back under a transaction block it still tracks): it is closed, and the workspace opens
        a new one (`usable` is False)."""
        if self.in_transaction(conn):
            halves.close_helper(conn)
            conn.close()

    def close(self, conns: Sequence[PgConnection]) -> None:
        for conn in conns:
            try:
                halves.close_helper(conn)
                conn.close()
            except psycopg.Error as exc:
                logger.warning("closing a connection to %s: %s", self.shown, exc)

    @contextlib.contextmanager
    def write_transaction(self, conn: PgConnection) -> Iterator[PgConnection]:
        self._writes.begun = self.writes_begun() + 1
        try:
            with conn.transaction():
                yield conn
        except (pg_errors.InsufficientPrivilege, pg_errors.ReadOnlySqlTransaction) as exc:
            raise self._read_only(exc) from None
        except pg_errors.DiskFull as exc:
            raise self._disk_full(exc) from None

    def writes_begun(self) -> int:
        return int(getattr(self._writes, "begun", 0))

    def lost_connection(self, error: BaseException, *, during_write: bool) -> StoreError:
        reason = _first_line(error)
        if during_write:
            message = (
                f"lost the connection to PostgreSQL at {self.shown} during a write ({reason}): "
                "it was not made again, since it may have been written; check, and call again "
                "if it was not"
            )
        else:
            message = (
                f"lost the connection to PostgreSQL at {self.shown} twice ({reason}): the server "
                "is restarting or going away; try again shortly"
            )
        return StoreError(message, details={"db": self.shown})

    @contextlib.contextmanager
    def read_snapshot(self, conn: PgConnection) -> Iterator[None]:
        """REPEATABLE READ: every statement of the block sees the database as of its first
        statement; READ ONLY: it takes no locks a writer could wait for."""
        with connection.read_snapshot(conn):
            yield

    @contextlib.contextmanager
    def savepoint(self, conn: PgConnection) -> Iterator[None]:
        with conn.transaction():  # nested: a SAVEPOINT
            yield

    def is_read_only(self, conn: PgConnection) -> bool:
        return bool(conn.execute(SELECT_READ_ONLY).fetchone()[0])

    def ensure_writable(self, conn: PgConnection) -> None:
        if self.is_read_only(conn):
            raise ReadOnly(
                f"the PostgreSQL database {self.shown} can be read but not changed through this "
                "connection (a read-only standby, or a role without write privileges): "
                "searching and reading work, changing it does not",
                details={"db": self.shown},
            )

    def is_disk_full(self, error: BaseException) -> bool:
        return _in_chain(error, pg_errors.DiskFull)

    def is_constraint_violation(self, error: BaseException) -> bool:
        return isinstance(error, pg_errors.IntegrityError)

    def _read_only(self, exc: psycopg.Error) -> ReadOnly:
        return ReadOnly(
            f"the PostgreSQL database {self.shown} refused a write ({_first_line(exc)}): it is "
            "a read-only standby, or the role has no write privileges; nothing was changed",
            details={"db": self.shown},
        )

    def _disk_full(self, exc: psycopg.Error) -> DiskFull:
        return DiskFull(
            f"the PostgreSQL server of {self.shown} is out of disk space ({_first_line(exc)}): "
            "the change was not written and nothing stored before is lost; free some space on "
            "the server and run it again",
            details={"db": self.shown},
        )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _in_chain(error: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
