"""Versioned schema migrations on PostgreSQL (the files are read by kbmcp/store/migrations.py).

Migrations are the numbered `sql/NNN_name.sql` files beside this module, applied in order, all
pending ones in ONE transaction together with the version record (`kbmcp_schema`) and the id
key of a new database, so a database is created whole or stays empty, and an upgrade happens
whole or not at all (PostgreSQL's DDL is transactional).

Several servers may start on one database at once: the transaction first takes an advisory
lock (`pg_advisory_xact_lock`), so one migrates and the others wait, re-read the version and
find nothing left to do. The lock is released at commit or rollback.

On a Citus coordinator (the database has the `citus` extension) the same transaction then
distributes the tables (kbmcp/store/postgres/citus.py), once: a new database, an upgraded one,
and one whose extension was created after kbmcp made its tables.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from kbmcp.errors import StoreError
from kbmcp.store.migrations import Migration, read_migrations
from kbmcp.store.postgres import citus
from kbmcp.store.postgres.id_key import ensure_id_key

# Any constant shared by every kbmcp process: the key of the migration lock.
ADVISORY_LOCK_KEY = 0x6B626D6370  # "kbmcp"

CREATE_VECTOR_EXTENSION = "CREATE EXTENSION IF NOT EXISTS vector"
CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS kbmcp_schema (
    id      integer PRIMARY KEY CHECK (id = 1),
    version integer NOT NULL
)
"""
TAKE_LOCK = "SELECT pg_advisory_xact_lock(%(key)s)"
VERSION_TABLE_EXISTS = "SELECT to_regclass('kbmcp_schema') IS NOT NULL"
SELECT_VERSION = "SELECT version FROM kbmcp_schema WHERE id = 1"
SET_VERSION = """
INSERT INTO kbmcp_schema (id, version) VALUES (1, %(version)s)
ON CONFLICT (id) DO UPDATE SET version = excluded.version
"""


# What ends a command in a migration file: a semicolon outside quotes, dollar quotes
# (function bodies) and comments.
_TOKEN = re.compile(r"--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(\$\w*\$).*?\1|;", re.DOTALL)


def statements(sql: str) -> list[str]:
    """The commands of a migration file, in order (each without its semicolon; empty ones and
    comment-only ones dropped)."""
    commands, start = [], 0
    for match in _TOKEN.finditer(sql):
        if match.group(0) == ";":
            commands.append(sql[start : match.start()])
            start = match.end()
    commands.append(sql[start:])
    kept = []
    for command in commands:
        code = _TOKEN.sub(lambda m: "" if m.group(0).startswith("--") else m.group(0), command)
        if code.strip():
            kept.append(command.strip())
    return kept


def all_migrations() -> list[Migration]:
    return read_migrations("kbmcp.store.postgres")


def latest_version() -> int:
    return len(all_migrations())


def current_version(conn: psycopg.Connection[Any]) -> int:
    if not conn.execute(VERSION_TABLE_EXISTS).fetchone()[0]:
        return 0
    row = conn.execute(SELECT_VERSION).fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: psycopg.Connection[Any], *, target: int | None = None) -> list[int]:
    """Apply the pending migrations up to `target` (default: all) in one transaction under the
    migration lock, then give a new database its id key. Returns the versions applied."""
    migrations = all_migrations()
    goal = len(migrations) if target is None else target
    found = current_version(conn)
    if found > len(migrations):
        raise StoreError(
            f"this database has schema version {found}, newer than this kbmcp knows "
            f"({len(migrations)}): upgrade kbmcp",
            details={"schema_version": found},
        )
    on_citus = citus.citus_version(conn) is not None
    distributing = goal == len(migrations) and on_citus
    if found >= goal and not (distributing and citus.needs_distribution(conn)):
        return []
    try:
        with conn.transaction():
            conn.execute(TAKE_LOCK, {"key": ADVISORY_LOCK_KEY})
            # Re-read under the lock: another process may have migrated meanwhile.
            pending = migrations[current_version(conn) : goal]
            if pending:
                conn.execute(CREATE_VECTOR_EXTENSION)
                conn.execute(CREATE_VERSION_TABLE)
            if on_citus and pending:
                # (Citus: DDL on distributed tables and functions in one transaction over one
                # connection per node, as distributing them is: citus.py)
                conn.execute(citus.SEQUENTIAL)
            for migration in pending:
                # Trap (Citus): a DDL command on a distributed table is sent on to the workers
                # with the query string it came in, and a string of several commands fails
                # there ("cannot insert multiple commands into a prepared statement"): on a
                # coordinator each command of the file goes alone.
                for command in statements(migration.sql) if on_citus else [migration.sql]:
                    conn.execute(command)
                conn.execute(SET_VERSION, {"version": migration.version})
            if pending and goal == len(migrations):
                ensure_id_key(conn)
            if distributing and citus.needs_distribution(conn):
                citus.distribute(conn)
    except psycopg.errors.FeatureNotSupported as exc:  # e.g. pgvector not installed
        raise StoreError(f"cannot set up the database: {exc}".splitlines()[0]) from None
    except psycopg.errors.UndefinedFile as exc:  # the extension's files are missing
        raise StoreError(
            "cannot set up the database: the pgvector extension is not installed on the server "
            f"({str(exc).splitlines()[0]})"
        ) from None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"cannot set up the database: {str(exc).splitlines()[0]} (run `CREATE EXTENSION "
            "vector` as a superuser once, or connect as the database's owner)"
        ) from None
    return [migration.version for migration in pending]
