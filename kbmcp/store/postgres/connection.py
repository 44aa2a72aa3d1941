"""Connecting to PostgreSQL: one error for a bad URL or an unreachable server, a pool, and the
connection settings every kbmcp connection has.

Connections are in autocommit mode: a read is one statement, and a write names its transaction
(`with conn.transaction():`), as SQLite's explicit BEGIN does. `json` columns come back as text
(as from SQLite), so the code that parses them is the same for both backends.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import IsolationLevel
from psycopg.pq import TransactionStatus
from psycopg.types.string import TextBinaryLoader, TextLoader
from psycopg_pool import ConnectionPool

from kbmcp.errors import StoreError
from kbmcp.store.postgres import halves
from kbmcp.store.postgres.url import is_postgres_url, shown_url
from kbmcp.store.postgres.vectors import register_vector

CONNECT_TIMEOUT_S = 10
POOL_MAX_SIZE = 8


def connect(url: str, *, migrate: bool = True) -> psycopg.Connection[Any]:
    """A connection to the database at `url`, its schema migrated (`migrate`). A malformed URL,
    an unreachable server, a refused login or a missing database is one StoreError that names
    the URL (password hidden) and the server's reason."""
    conn = _open(url)
    if migrate:
        from kbmcp.store.postgres.migrations import migrate as apply_migrations

        try:
            if apply_migrations(conn):
                register_vector(conn)  # the type exists now (a new database)
        except BaseException:
            conn.close()
            raise
    halves.remember_url(conn, url)  # a large scope's second connection opens with it
    return conn


def open_pool(url: str, *, max_size: int = POOL_MAX_SIZE) -> ConnectionPool:
    """A pool of prepared connections (a server's threads each take one per request). The first
    connection is opened and the schema migrated before the pool is returned, so a bad URL is
    reported here, not on the first request."""
    connect(url).close()
    pool = ConnectionPool(
        _conninfo(url),
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True},
        configure=configure,
        open=True,
    )
    return pool


def configure(conn: psycopg.Connection[Any]) -> None:
    """Settings of every kbmcp connection."""
    for name in ("json", "jsonb"):
        conn.adapters.register_loader(name, TextLoader)
    conn.adapters.register_loader("json", TextBinaryLoader)  # binary json is its text
    register_vector(conn)


@contextmanager
def transaction(conn: psycopg.Connection[Any]) -> Iterator[None]:
    with conn.transaction():
        yield


@contextmanager
def read_snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A REPEATABLE READ, READ ONLY transaction, begun by one statement (`BEGIN ISOLATION LEVEL
    REPEATABLE READ READ ONLY`: psycopg writes the connection's transaction characteristics
    into its BEGIN), not a BEGIN and then a SET TRANSACTION: a round trip less per read, the
    same snapshot. The characteristics are the connection's only for this BEGIN (write
    transactions begin READ WRITE); the caller's snapshot when it has one open."""
    if conn.info.transaction_status != TransactionStatus.IDLE:
        yield
        return
    saved = conn.isolation_level, conn.read_only
    conn.isolation_level, conn.read_only = IsolationLevel.REPEATABLE_READ, True
    try:
        with conn.transaction():
            yield
    finally:
        # Not on a connection the failure left broken (the workspace replaces it).
        if conn.info.transaction_status == TransactionStatus.IDLE:
            conn.isolation_level, conn.read_only = saved


def _open(url: str) -> psycopg.Connection[Any]:
    if not is_postgres_url(url):
        raise StoreError(f"not a PostgreSQL URL: {shown_url(url)}", details={"db": shown_url(url)})
    try:
        conn = psycopg.connect(_conninfo(url), autocommit=True)
    except psycopg.ProgrammingError as exc:  # libpq could not parse the URL
        raise StoreError(
            f"not a valid PostgreSQL URL: {shown_url(url)}: {_reason(exc)}",
            details={"db": shown_url(url)},
        ) from None
    except psycopg.OperationalError as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL at {shown_url(url)}: {_reason(exc)}",
            details={"db": shown_url(url)},
        ) from None
    try:
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _conninfo(url: str) -> str:
    """The URL with a connect timeout unless it sets one (libpq waits forever by default)."""
    url = url.strip()
    if "connect_timeout=" in url:
        return url
    return f"{url}{'&' if '?' in url else '?'}connect_timeout={CONNECT_TIMEOUT_S}"


# libpq quotes the whole URL in some messages; it may hold a password.
_QUOTED_URL = re.compile(r'"?postgres(?:ql)?://[^"\s]*"?', re.IGNORECASE)


def _reason(exc: Exception) -> str:
    """The server's or libpq's message on one line (libpq's spans several), without the URL."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # libpq prefixes: 'connection to server at "h" (1.2.3.4), port 5432 failed: ...'
    reason = lines[-1] if lines else type(exc).__name__
    for line in lines:
        if "failed:" in line:
            reason = line.split("failed:", 1)[1].strip() or reason
            break
    return _QUOTED_URL.sub("the URL", reason)
