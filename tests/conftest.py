"""Shared fixtures: a real file per test, the hashing embedder, and JSON snapshots in snapshots/."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from mcp import Client
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.location import PyTestLocation

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.ids import TEST_KEY_ENV
from kbmcp.workspace import Workspace
from tests.cli_support import Run, cli_runner
from tests.id_support import TEST_ID_KEY
from tests.mcp_support import HttpServer, build_corpus, connect
from tests.postgres_fixtures import (  # noqa: F401 (fixtures)
    fresh_postgres_url,
    postgres_server_url,
    postgres_url,
)
from tests.store_backends import (  # noqa: F401 (fixtures)
    backend_db,
    backend_workspace,
    module_backend,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_DIR = REPO_ROOT / "snapshots"


class TopLevelJSONSnapshot(JSONSnapshotExtension):
    """Snapshots as JSON files under the repository's top-level snapshots/<test module>/."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(SNAPSHOT_DIR / Path(test_location.filepath).stem)


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(TopLevelJSONSnapshot)


@pytest.fixture(scope="session", autouse=True)
def _pinned_id_key() -> Iterator[None]:
    """Every file the tests create gets the same id key, so ids in snapshots are stable. Session
    scope: module-scoped corpora are built before function-scoped fixtures run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TEST_KEY_ENV, TEST_ID_KEY.hex())
        yield


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never touch the user's real database and use the fast hashing embedder unless they
    ask for the default model explicitly."""
    monkeypatch.setenv("KBMCP_DB", str(tmp_path / "env-default.db"))
    monkeypatch.setenv("KBMCP_EMBEDDER", "hash")
    monkeypatch.delenv("KBMCP_NOW", raising=False)


@pytest.fixture
def kbmcp(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """Run `kbmcp ARGS...` in-process through the real entry point, with its error handling."""
    return cli_runner(capsys)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kb.db"


@pytest.fixture
def workspace(db_path: Path) -> Iterator[Workspace]:
    """A long-lived workspace (as the server's): search uses its in-memory caches. The SQL-only
    one-shot path is compared with it in tests/test_search_one_shot.py."""
    ws = Workspace(
        Settings(db=db_path, embedder="hash"), embedder=HashingEmbedder(), long_lived=True
    )
    try:
        yield ws
    finally:
        ws.close()


# ---------------------------------------------------------------- MCP tests (tests/test_mcp_*.py)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixed MCP test corpus (tests/mcp_support.py), built once per test module."""
    root = tmp_path_factory.mktemp("corpus")
    db = root / "kb.db"
    build_corpus(root, db)
    return db


@pytest.fixture(scope="module")
def http_server(corpus_db: Path) -> Iterator[HttpServer]:
    """`kbmcp serve --http` on the module's corpus, one per test module."""
    server = HttpServer(corpus_db)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def client(corpus_db: Path) -> AsyncIterator[Client]:
    """An SDK client talking to the server in-process."""
    async with connect("inprocess", corpus_db) as connected:
        yield connected
