"""Shared fixtures: a real database per test (an SQLite file, and PostgreSQL for the tests that
run on both backends: tests/store_backends.py), the hashing embedder, and JSON snapshots in
snapshots/ (one per test whatever the backend: both must match it)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from mcp import Client
from mcp.server.mcpserver import MCPServer
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.location import PyTestLocation
from syrupy.types import SnapshotIndex

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.ids import TEST_KEY_ENV
from kbmcp.server.app import build_server
from kbmcp.workspace import Workspace
from tests import processes, store_backends
from tests.cli_support import Run, cli_runner
from tests.id_support import TEST_ID_KEY
from tests.mcp_support import HttpServer, build_corpus, hash_workspace
from tests.postgres_fixtures import (  # noqa: F401 (fixtures)
    fresh_postgres_url,
    new_postgres_url,
    postgres_server_url,
    postgres_template,
    postgres_url,
)
from tests.store_backends import (  # noqa: F401 (fixtures)
    backend_db,
    backend_workspace,
    database_on,
    module_backend,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_DIR = REPO_ROOT / "snapshots"

# Hypothesis fails an example slower than 200 ms by default: on a loaded machine a plain one
# is. No property test here is about speed, so none has a deadline (tests/patience.py).
settings.register_profile("kbmcp", deadline=None)
settings.load_profile("kbmcp")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", store_backends.MARKER_HELP)
    if not hasattr(config, "workerinput"):  # the controller: before xdist starts its workers
        _share_bytecode_with_children(config)
    # A runner started with SIGINT ignored (nohup, a script's background job) passes that on
    # to every process the tests start, and `kbmcp watch` could not be stopped with Ctrl-C:
    # the tests send SIGINT as a terminal does, so they get a terminal's disposition.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if "sqlite" not in store_backends.selected_backends():
        # The SQLite-only tests do not run, so their snapshots go unused: not an error here.
        config.option.warn_unused_snapshots = True


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Nothing the tests started outlives the run (each xdist worker sweeps its own)."""
    processes.kill_leftovers()


def _share_bytecode_with_children(config: pytest.Config) -> None:
    """With PYTHONDONTWRITEBYTECODE set, every Python process the suite starts (xdist's workers
    and ~150 `kbmcp` servers and commands) compiled every kbmcp module it imported, ~0.2 s of CPU
    each, and kbmcp is usually an editable install, so no byte-code exists for it. The children
    get a byte-code cache instead: PYTHONPYCACHEPREFIX (which keeps byte-code out of the source
    tree) in the virtual environment, so it outlives the run, else in a temporary folder removed
    at the end. A prefix of the user's own is kept; without PYTHONDONTWRITEBYTECODE nothing
    changes (Python's own __pycache__ folders already do this)."""
    if not sys.dont_write_bytecode or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    if sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):
        prefix = os.path.join(sys.prefix, "kbmcp-test-pycache")
    else:
        prefix = tempfile.mkdtemp(prefix="kbmcp-test-pycache-")
        config.add_cleanup(lambda: shutil.rmtree(prefix, ignore_errors=True))
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker more than the cores this process may use. About a tenth of the
    suite's time is spent waiting (servers starting, sessions expiring, watch debounces): with
    a worker per core, the 2-core machine sat idle 39 of its 378 core-seconds and the suite took
    187 s; with one more, 12 of 349 and 173 s. PYTEST_XDIST_AUTO_NUM_WORKERS still decides
    when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    store_backends.parametrize_backend(metafunc)


# The test files that take longest, longest first (summed test times, both backends). Under
# `--dist loadfile` each xdist worker is handed whole files in the order they are collected
# (`--no-loadscope-reorder` in pyproject.toml: xdist's own order, most tests first, sent the
# one-test files that take 10-30 s, such as the README demo, to the very end, where one worker
# ran them alone while the other idled). These start first, then the other files, most tests
# first; short files fill in around the long ones. Only the order changes.
LONGEST_FILES = (
    "test_readme_demo.py",
    "test_memories.py",
    "test_hostile_input.py",
    "test_long_running.py",
    "test_mcp_tools.py",
    "test_crash_safety.py",
    "test_access_http.py",
    "test_search_isolation_property.py",
    "test_dns_rebinding.py",
    "test_multi_server.py",
    "test_read_only.py",
    "test_mcp_query.py",
    "test_mcp_transports.py",
    "test_postgres_ranking.py",
    "test_watch.py",
    "test_http_sessions.py",
    "test_soak_bench.py",
    "test_fuzz_tools.py",
    "test_write_batches.py",
    "test_ingest_order.py",
    "test_conformance.py",
    "test_cli.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {name: rank for rank, name in enumerate(LONGEST_FILES)}
    per_file: dict[str, int] = {}
    for item in items:
        per_file[item.path.name] = per_file.get(item.path.name, 0) + 1
    # A stable sort: each file's tests stay together and in their order (module-scoped
    # fixtures, the backends' halves). Every worker sorts the same collection the same way.
    items.sort(
        key=lambda item: (
            first.get(item.path.name, len(first)),
            -per_file[item.path.name],
            item.path.name,
        )
    )


# A backend's id in a test's parameters: `[sqlite]`, `[hybrid-postgres]`, `[postgres-x]`.
_BACKEND_ID = re.compile(r"(?<=[\[-])(?:sqlite|postgres)(?:-|(?=\]))")


def without_backend(name: str) -> str:
    """A snapshot name with the backend's id taken out of the test's parameters:
    `test_x[hybrid-postgres]` -> `test_x[hybrid]`, `test_x[sqlite]` -> `test_x`."""
    return _BACKEND_ID.sub("", name).replace("-]", "]").replace("[]", "")


class TopLevelJSONSnapshot(JSONSnapshotExtension):
    """Snapshots as JSON files under the repository's top-level snapshots/<test module>/, one
    per test whatever its backend (the backend's id is not part of the name)."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(SNAPSHOT_DIR / Path(test_location.filepath).stem)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        return without_backend(super().get_snapshot_name(test_location=test_location, index=index))


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
def workspace(backend: str, db_path: Path, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    """A long-lived workspace (as the server's) on a fresh database of the test's backend: on
    SQLite (the file `db_path`) search uses its in-memory caches (the SQL-only one-shot path is
    compared with it in tests/test_search_one_shot.py); on PostgreSQL a new database."""
    db: Path | str = db_path
    if backend == "postgres":
        db = str(request.getfixturevalue("new_postgres_url"))
    ws = Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder(), long_lived=True)
    try:
        yield ws
    finally:
        ws.close()


# ---------------------------------------------------------------- MCP tests (tests/test_mcp_*.py)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixed MCP test corpus (tests/mcp_support.py) in an SQLite file, built once per test
    module; its source files lie beside it (`corpus_file.parent`)."""
    root = tmp_path_factory.mktemp("corpus")
    db = root / "kb.db"
    build_corpus(root, db)
    return db


@pytest.fixture(scope="module")
def corpus_db(backend: str, corpus_file: Path, request: pytest.FixtureRequest) -> Path | str:
    """The MCP test corpus on the test's backend: the file, or a copy of it in PostgreSQL
    (same ids, so the same answers and snapshots)."""
    return database_on(backend, corpus_file, request)


@pytest.fixture(scope="module")
def http_server(corpus_db: Path | str) -> Iterator[HttpServer]:
    """`kbmcp serve --http` on the module's corpus, one per test module and backend."""
    server = HttpServer(corpus_db)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def inprocess_server(corpus_db: Path | str) -> Iterator[MCPServer]:
    """The server on the module's corpus, built once per module and backend: building one
    registers every tool with the SDK (~35 ms of CPU, which ~250 tests paid each). Its
    workspace is the module's too, as a real server's serves every session."""
    ws = hash_workspace(corpus_db)
    try:
        yield build_server(ws)
    finally:
        ws.close()


@pytest.fixture
async def client(inprocess_server: MCPServer) -> AsyncIterator[Client]:
    """An SDK client talking to the module's server in-process, in a session of its own."""
    async with Client(inprocess_server) as connected:
        yield connected
