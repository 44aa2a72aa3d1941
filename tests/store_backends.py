"""Fixtures that run a test on both store backends: an SQLite file and a PostgreSQL database.

`backend_db` is a fresh database of each kind (a file path, or the URL of the module's
PostgreSQL database emptied for the test: tests/postgres_fixtures.py), `backend_workspace` a
workspace on it (hashing embedder, created and migrated). A test that takes either runs twice,
with the ids `[sqlite]` and `[postgres]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
