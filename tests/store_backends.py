"""Fixtures that run a test on both store backends: an SQLite file and a PostgreSQL database.

`backend_db` is a fresh database of each kind (a file path, or the URL of the module's
PostgreSQL database emptied for the test: tests/postgres_fixtures.py), `backend_workspace` a
workspace on it (hashing embedder, created and migrated). A test that takes either runs twice,
with the ids `[sqlite]` and `[postgres]`. `module_backend` and `workspace_on` do the same for a
corpus a module builds once in a file (PostgreSQL gets a copy of it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.workspace import Workspace

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def backend_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    if request.param == "sqlite":
        return tmp_path / "kb.db"
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def backend_workspace(backend_db: Path | str) -> Iterator[Workspace]:
    ws = Workspace(Settings(db=backend_db, embedder="hash"), embedder=HashingEmbedder())
    try:
        yield ws
    finally:
        ws.close()


@pytest.fixture(scope="module", params=BACKENDS)
def module_backend(request: pytest.FixtureRequest) -> str:
    """The backend of a module-scoped corpus (see `workspace_on`); its tests run once per
    backend, grouped."""
    return str(request.param)


def workspace_on(
    backend: str, source: Path, request: pytest.FixtureRequest, *, long_lived: bool = False
) -> Workspace:
    """A workspace on the SQLite file `source` that a test built, or (`backend` "postgres") on
    a copy of it in the module's PostgreSQL database: `kbmcp copy` keeps every row and id, so
    both give the same results, snapshots included. Build corpora once, in a file, then open
    them with this: ingest and memories need not run on both backends for a search test."""
    if backend == "sqlite":
        db: Path | str = source
    else:
        from kbmcp.store.copy import copy_store

        db = str(request.getfixturevalue("postgres_url"))
        copy_store(str(source), db, force=True)
    settings = Settings(db=db, embedder="hash")
    return Workspace(settings, embedder=HashingEmbedder(), long_lived=long_lived)


def rows(ws: Workspace, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """The rows of a plain SELECT with `?` parameters, on either backend (PostgreSQL spells
    them `%s`): the tests' lookups of ids and texts."""
    if ws.store.kind == "postgres":
        sql = sql.replace("?", "%s")
    return [tuple(row) for row in ws.conn.execute(sql, args).fetchall()]
