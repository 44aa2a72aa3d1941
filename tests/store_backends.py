"""The whole suite on both store backends: an SQLite file and a PostgreSQL database.

The mechanism: a test that uses a database fixture depends, through it, on `backend`, which is
not a fixture but a module-scoped parameter that `parametrize_backend` (conftest's
`pytest_generate_tests`) gives every such test: `sqlite` and `postgres`. So a test runs once per
backend, ids `[sqlite]` / `[postgres]`, and a module's corpus is built once per backend (pytest
groups the tests of one parameter value). Snapshots ignore the backend id
(tests/conftest.py): both runs compare against the same file, which is the "identical across
backends" check.

A test that is about the file itself (WAL, read-only mounts, backup of a file, file modes, disk
full, crash safety) or about a service not yet on the store contract carries
`@pytest.mark.sqlite_only("why")` (or a module's `pytestmark`): it runs on SQLite only, and
`grep -rn sqlite_only tests/` lists what is left and why. A reason that starts with
`waits for` names the service (and the helper) a test waits for.

`KBMCP_TEST_BACKENDS=sqlite` (or `postgres`) runs one backend's half (tests that use no
database run either way): the suite's time per backend.

Fixtures here: `backend_db` (a new database: a file path, or a new PostgreSQL database already
at the latest schema, tests/postgres_fixtures.py), `backend_workspace` (a workspace on it),
`module_backend` (the backend of a module-scoped corpus) and `workspace_on` / `database_on`
(a corpus built once in a file, or a copy of it in PostgreSQL: `kbmcp copy` keeps every row
and id, so results are identical).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.workspace import Workspace

BACKENDS = ("sqlite", "postgres")
BACKENDS_ENV = "KBMCP_TEST_BACKENDS"
SQLITE_ONLY = "sqlite_only"
MARKER_HELP = (
    f"{SQLITE_ONLY}(reason): runs on the SQLite backend only (a file-only behaviour, or "
    "'waits for ...' a service not yet on both backends); see tests/store_backends.py"
)


def selected_backends() -> tuple[str, ...]:
    """The backends this run covers: $KBMCP_TEST_BACKENDS (comma-separated), else both."""
    given = os.environ.get(BACKENDS_ENV, "").strip()
    if not given:
        return BACKENDS
    chosen = tuple(name.strip() for name in given.split(",") if name.strip())
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown:
        raise pytest.UsageError(f"{BACKENDS_ENV}: unknown backend(s) {unknown}; use {BACKENDS}")
    return chosen


def parametrize_backend(metafunc: pytest.Metafunc) -> None:
    """Give every test that depends on `backend` one run per selected backend (SQLite only for
    a test marked `sqlite_only`, whose reason is required)."""
    if "backend" not in metafunc.fixturenames or _parametrized_by_the_test(metafunc):
        return
    marker = metafunc.definition.get_closest_marker(SQLITE_ONLY)
    if marker is not None and not (marker.args and str(marker.args[0]).strip()):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {SQLITE_ONLY} needs a reason")
    values = [name for name in selected_backends() if name == "sqlite" or marker is None]
    metafunc.parametrize("backend", values, scope="module")


def _parametrized_by_the_test(metafunc: pytest.Metafunc) -> bool:
    """The test lists its backends itself (`@pytest.mark.parametrize("backend", ...)`)."""
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        if isinstance(names, str):
            names = [name.strip() for name in names.split(",")]
        if "backend" in names:
            return True
    return False


def is_postgres(db: Path | str) -> bool:
    return isinstance(db, str) and db.startswith("postgresql")


@pytest.fixture
def backend_db(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    if backend == "sqlite":
        return tmp_path / "kb.db"
    return str(request.getfixturevalue("new_postgres_url"))


@pytest.fixture
def backend_workspace(backend_db: Path | str) -> Iterator[Workspace]:
    ws = Workspace(Settings(db=backend_db, embedder="hash"), embedder=HashingEmbedder())
    try:
        yield ws
    finally:
        ws.close()


@pytest.fixture(scope="module")
def module_backend(backend: str) -> str:
    """The backend of a module-scoped corpus (see `workspace_on`)."""
    return backend


def database_on(backend: str, source: Path, request: pytest.FixtureRequest) -> Path | str:
    """The SQLite file `source` a test built, or (`backend` "postgres") a PostgreSQL database
    holding a copy of it, of its own (per module and file: a module may have several corpora,
    and tests that empty `postgres_url`), dropped with the fixture that asked for it."""
    if backend == "sqlite":
        return source
    from kbmcp.store.copy import copy_store
    from tests.postgres_fixtures import module_database

    url = module_database(request, str(source))
    copy_store(str(source), url, force=True)
    return url


def workspace_on(
    backend: str, source: Path, request: pytest.FixtureRequest, *, long_lived: bool = False
) -> Workspace:
    """A workspace on `database_on(backend, source)`. Build corpora once, in a file, then open
    them with this: ingest and memories need not run on both backends for a search test."""
    settings = Settings(db=database_on(backend, source, request), embedder="hash")
    return Workspace(settings, embedder=HashingEmbedder(), long_lived=long_lived)


def rows(ws: Workspace, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """The rows of a plain SELECT with `?` parameters, on either backend (PostgreSQL spells
    them `%s`): the tests' lookups of ids and texts."""
    if ws.store.kind == "postgres":
        sql = sql.replace("?", "%s")
    return [tuple(row) for row in ws.conn.execute(sql, args).fetchall()]
