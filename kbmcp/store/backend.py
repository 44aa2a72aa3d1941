"""The store contract: the one interface between kbmcp's services and a database.

A knowledge base lives in an SQLite file (kbmcp/store/sqlite/) or in a PostgreSQL database
(kbmcp/store/postgres/). The code above the store (kbmcp/service/, kbmcp/search/,
kbmcp/access.py, kbmcp/workspace.py) reaches either through a `Store`, opened from the settings
by `open_store` (kbmcp/store/open_store.py), and never imports a driver nor holds SQL:

- connections: `connect` opens one (a `Connection`, kbmcp/store/connection.py). The workspace
  keeps one per live thread (`workspace.conn`, kbmcp/workspace.py) on both backends, so a
  thread's calls share a connection and no checkout is threaded through the services; the store
  functions take it as their first argument;
- transactions: `write_transaction(conn)` (SQLite BEGIN IMMEDIATE, PostgreSQL a transaction on
  an autocommit connection), `read_snapshot(conn)` (one consistent view for several reads:
  SQLite BEGIN in WAL mode, PostgreSQL REPEATABLE READ READ ONLY), `savepoint(conn)` inside
  either;
- errors: what the drivers raise is mapped to kbmcp's errors where the caller can act on it
  (`ReadOnly`, `DiskFull`, `StoreError`); `database_errors`, `is_disk_full` and
  `is_constraint_violation` classify the rest without naming a driver;
- concerns: one attribute per family of statements (`store.catalog`, `store.vectors`, ...).
  Each concern has a contract module kbmcp/store/<concern>.py (its row types, a Protocol listing
  its functions, and the rules both backends share) and one module per backend,
  kbmcp/store/sqlite/<concern>.py and kbmcp/store/postgres/<concern>.py, that satisfy the
  Protocol with the same function names and signatures (tests/test_store_contract.py checks).
  Where the logic around the SQL is the same on both, it is written once in the contract module
  (`SqlCatalog`, `SqlMemories`, ...): a backend subclasses it with its statements as class
  attributes and its `Dialect` (kbmcp/store/dialect.py: what the drivers do differently), and
  overrides only what really differs; the Store's attribute is an instance.

The imports run one way: this module imports the concern contracts, and they import only the
leaf modules kbmcp/store/connection.py (`Connection`) and kbmcp/search/resolved.py (the
resolved `Scope` and `SimilarityFloor`), never this module (tests/test_import_graph.py).

A service calls `workspace.store.<concern>.<function>(conn, ...)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal, Protocol

from kbmcp.errors import StoreError
from kbmcp.store.connection import Connection

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

Kind = Literal["sqlite", "postgres"]


class Store(Protocol):
    """A database kbmcp reads and writes (see the module docstring)."""

    kind: Kind
    # How messages name the database: the file's path, or the URL with its password hidden.
    shown: str
    # Failures of the database itself rather than of one piece of data (full disk, I/O, lost
    # connection, locked, read-only): ingest ends a batch on them instead of skipping a document.
    database_errors: tuple[type[BaseException], ...]
    # Every error the driver raises (a catch-all for loops that must keep running, e.g. watch).
    driver_errors: tuple[type[BaseException], ...]
    # Whether an idle connection holds something on the other side (a PostgreSQL server's
    # session, which a smart shutdown waits for): servers close theirs when idle.
    closes_idle_connections: bool

    admin: Admin
    audit: Audit
    catalog: Catalog
    evaluation: Evaluation
    grants: Grants
    id_key: IdKeys
    index: Index
    ingest: Ingest
    listing: Listing
    memories: Memories
    vectors: Vectors
    reads: Reads
    reembed: Reembed
    scan: Scan
    search: Search
    transfer: Transfer

    def connect(self, *, create: bool = False, migrate: bool = False) -> Connection:
        """A new connection, ready for use. `create`: a missing or empty database may become a
        knowledge base (otherwise a StoreError saying how to make one); `migrate`: bring the
        schema up to date first (the first connection of a process does)."""
        ...

    def remove_if_created_and_empty(self) -> bool:
        """After a command that created the database failed, with every connection closed:
        remove the database if it holds no document or memory and nobody else has it open, so
        a new database is complete or absent; whether it was removed (SQLite: the new file
        and its -wal and -shm; PostgreSQL: never, the database existed before)."""
        ...

    def usable(self, conn: Connection) -> bool:
        """False once the connection is closed or broken (a PostgreSQL server restarted): the
        workspace then opens a new one for the thread."""
        ...

    def in_transaction(self, conn: Connection) -> bool: ...

    def abandon(self, conn: Connection) -> None:
        """Roll back a transaction left open by a thread that ended (never expected), so it
        cannot leak into the next thread's first call."""
        ...

    def close(self, conns: Sequence[Connection]) -> None:
        """Close every connection (errors are logged, not raised); SQLite first folds the WAL
        into the file."""
        ...

    def write_transaction(self, conn: Connection) -> AbstractContextManager[Connection]:
        """A short write transaction, committed at the end of the block, rolled back whole on an
        exception. A read-only database raises ReadOnly before anything starts, a full disk
        DiskFull after the rollback."""
        ...

    def writes_begun(self) -> int:
        """How many write transactions the calling thread has begun on this store, ever: a
        request during which it did not change wrote nothing, and can be made again."""
        ...

    def lost_connection(self, error: BaseException, *, during_write: bool) -> StoreError:
        """The error for a request whose connection the database server dropped (`usable` is
        False after `error`) and that is not made again: `during_write`, it began a write,
        which may or may not have been made."""
        ...

    def read_snapshot(self, conn: Connection) -> AbstractContextManager[None]:
        """One consistent snapshot for the reads inside the block, never blocking or blocked by
        writers; inside a transaction already, the block joins it."""
        ...

    def savepoint(self, conn: Connection) -> AbstractContextManager[None]:
        """Inside a transaction: the block's writes are undone alone if it raises."""
        ...

    def is_read_only(self, conn: Connection) -> bool:
        """Whether writes through `conn` are refused (a read-only file, a PostgreSQL role
        without write privileges or a hot standby)."""
        ...

    def ensure_writable(self, conn: Connection) -> None:
        """Raise ReadOnly, naming the database, if `conn` cannot write."""
        ...

    def is_disk_full(self, error: BaseException) -> bool: ...

    def is_constraint_violation(self, error: BaseException) -> bool:
        """A UNIQUE, foreign key, NOT NULL or CHECK constraint refused a write."""
        ...
