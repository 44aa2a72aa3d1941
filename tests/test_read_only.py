"""Read-only and missing files (issue 11, item 3).

A read-only file (read-only mount, `chmod a-w`, a shipped file) is searched and served without a
single byte changing; writes are refused with a `read_only` error. Reading commands and `serve`
never create a file, and never write into an empty file or another application's SQLite file.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import ReadOnly, StoreError
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.store.sqlite import migrations
from kbmcp.store.sqlite.connection import open_connection, write_transaction
from kbmcp.workspace import Workspace
from tests import processes
from tests.cli_support import assert_one_line_error
from tests.mcp_support import REPO_ROOT, HttpServer, connect, payload, subprocess_env
from tests.server_process import StdioProcess

pytestmark = pytest.mark.sqlite_only("file: read-only files, mounts and frozen WAL files")

READING_COMMANDS: list[tuple[str, ...]] = [
    ("ls",),
    ("ls", "--all"),
    ("search", "herons"),
    ("read", "doc_0123456789abcdef"),
    ("doctor",),
    ("serve",),
    ("serve", "--http", "--port", "0"),
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "herons.md").write_text("# Herons\n\nGrey herons stand still in shallow water.\n")
    (folder / "keys.md").write_text("# Keys\n\nRotate API keys every ninety days.\n")
    return folder


@pytest.fixture
def read_only_db(kbmcp, corpus: Path, tmp_path: Path) -> Iterator[Path]:
    """A knowledge base built by `kbmcp add`, then made read-only with `chmod a-w`."""
    db = tmp_path / "shipped" / "kb.db"
    assert kbmcp("--db", db, "add", corpus).code == 0
    db.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    yield db
    db.chmod(stat.S_IRUSR | stat.S_IWUSR)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


# ------------------------------------------------------------------------ missing files


@pytest.mark.parametrize("command", READING_COMMANDS, ids=" ".join)
def test_reading_commands_and_serve_refuse_a_missing_file(
    kbmcp, tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "mistyped.db"
    run = kbmcp("--db", missing, *command)
    assert_one_line_error(run, "no knowledge-base file", str(missing), "kbmcp add")
    assert not missing.exists()


@pytest.mark.anyio
async def test_serve_create_starts_an_empty_knowledge_base(tmp_path: Path) -> None:
    db = tmp_path / "new" / "kb.db"
    env = subprocess_env(db)
    command = [sys.executable, "-m", "kbmcp", "--db", str(db), "serve", "--create"]
    process = processes.run(
        command, input="", env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert process.returncode == 0, process.stderr
    assert db.exists()
    async with connect("stdio", db) as client:  # and now it is served without --create
        result = await client.call_tool("list_knowledge_bases", {})
    assert payload(result) == {"knowledge_bases": []}


# ------------------------------------------------------------ empty and foreign files


@pytest.mark.parametrize("command", READING_COMMANDS, ids=" ".join)
def test_reading_commands_never_write_into_an_empty_file(
    kbmcp, tmp_path: Path, command: tuple[str, ...]
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    run = kbmcp("--db", empty, *command)
    assert_one_line_error(run, f"{empty} is an empty file", "kbmcp add")
    assert empty.stat().st_size == 0
    assert folder_listing(empty) == ["empty.db"]  # no -wal / -shm / -journal either


def test_add_makes_an_empty_file_a_knowledge_base(kbmcp, corpus: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    assert kbmcp("--db", empty, "add", corpus).code == 0
    assert len(kbmcp("--db", empty, "ls", "--all", "--json").json()["documents"]) == 2


@pytest.mark.parametrize("command", [*READING_COMMANDS, ("add", "."), ("reembed",)], ids=" ".join)
def test_no_command_writes_into_another_applications_database(
    kbmcp, tmp_path: Path, command: tuple[str, ...]
) -> None:
    foreign = tmp_path / "app.sqlite"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.close()
    before = digest(foreign)
    run = kbmcp("--db", foreign, *command)
    assert_one_line_error(run, "another application", "customers", "choose another --db")
    assert digest(foreign) == before
    assert folder_listing(foreign) == ["app.sqlite"]


# ------------------------------------------------------------------ read-only files


def test_a_read_only_file_is_searched_listed_and_read(kbmcp, read_only_db: Path) -> None:
    before = digest(read_only_db)
    hits = kbmcp("--db", read_only_db, "search", "grey herons", "--json")
    assert hits.code == 0, hits.err
    assert hits.json()["results"][0]["path"] == "herons.md"
    listing = kbmcp("--db", read_only_db, "ls", "--all", "--json").json()
    herons = next(d for d in listing["documents"] if d["path"] == "herons.md")
    read = kbmcp("--db", read_only_db, "read", herons["document_id"])
    assert read.code == 0 and "shallow water" in read.out
    doctor = kbmcp("--db", read_only_db, "doctor", "--json").json()
    assert doctor["counts"]["documents"] == 2
    assert digest(read_only_db) == before


def test_writes_to_a_read_only_file_are_refused_clearly(
    kbmcp, corpus: Path, read_only_db: Path
) -> None:
    before = digest(read_only_db)
    (corpus / "new.md").write_text("# New\n\nA new document.\n")
    for command in (("add", corpus), ("reembed",)):
        run = kbmcp("--db", read_only_db, *command)
        assert_one_line_error(run, str(read_only_db), "read-only", "searching and reading work")
    assert digest(read_only_db) == before


def test_write_transaction_on_a_read_only_file_raises_read_only(read_only_db: Path) -> None:
    conn = open_connection(read_only_db, create=False)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # unchanged, not set
        with pytest.raises(ReadOnly) as caught, write_transaction(conn):
            pytest.fail("the transaction must not start")
        assert caught.value.code == "read_only"
        assert caught.value.details == {"path": str(read_only_db)}
        assert not conn.in_transaction
    finally:
        conn.close()


def test_an_old_schema_on_a_read_only_file_names_the_fix(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = open_connection(old, apply_migrations=False)
    migrations.migrate(conn, target=1)
    conn.close()
    old.chmod(stat.S_IRUSR)
    with pytest.raises(ReadOnly, match=r"schema version 1 .* open it once with write access"):
        open_connection(old, create=False)


def test_a_missing_file_stays_a_store_error_for_the_library(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no knowledge-base file"):
        open_connection(tmp_path / "nothing.db", create=False)
    assert not (tmp_path / "nothing.db").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_read_only_file_is_served(read_only_db: Path, transport: str) -> None:
    before = digest(read_only_db)
    server = HttpServer(read_only_db) if transport == "http" else None
    try:
        async with connect(transport, read_only_db, server and server.url) as client:
            found = payload(await client.call_tool("search_knowledge", {"query": "api keys"}))
            listed = payload(await client.call_tool("list_documents", {}))
    finally:
        if server is not None:
            server.stop()
    assert found["results"][0]["path"] == "keys.md"
    assert len(listed["documents"]) == 2
    assert digest(read_only_db) == before


def _can_mount_read_only() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = processes.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt && mount -o remount,ro /mnt"],
        capture_output=True,
        timeout=60,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_read_only(), reason="needs mount namespaces (root)")
def test_a_frozen_wal_file_on_a_read_only_mount_needs_immutable(
    read_only_db: Path, tmp_path: Path
) -> None:
    """A WAL-mode file on a read-only file system, without the `-shm` file a WAL reader needs
    (nobody has it open) and no way to create it. Read with locking it is refused, naming the
    ways out; `--immutable` (the user's promise that nobody writes it) reads it. Runs in a
    private mount namespace (nothing leaks out)."""
    mount_point = tmp_path / "ro-mount"
    mount_point.mkdir()
    kbmcp = f"{sys.executable} -m kbmcp --db {mount_point}/kb.db"
    script = (
        f"mount -t tmpfs none {mount_point} && cp {read_only_db} {mount_point}/kb.db && "
        f"mount -o remount,ro {mount_point} && "
        f"{{ {kbmcp} search herons --json; echo exit=$?; }} && "
        f"{kbmcp} --immutable search herons --json"
    )
    run = processes.run(
        ["unshare", "-m", "sh", "-c", script],
        env=subprocess_env(read_only_db),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    refused = run.stderr.splitlines()
    assert len(refused) == 1 and refused[0].startswith("error: cannot read "), run.stderr
    assert "-shm file is missing" in refused[0] and "--immutable" in refused[0]
    assert "exit=1" in run.stdout
    assert '"path": "herons.md"' in run.stdout


def test_immutable_refuses_a_file_with_changes_still_in_its_wal(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    writer = open_connection(db)  # open: its last commits are in kb.db-wal
    try:
        writer.execute("INSERT INTO tenant (public_id, name, created_at) VALUES ('t', 'x', '0')")
        with pytest.raises(StoreError, match="holds changes not yet in the file"):
            open_connection(db, create=False, immutable=True)
    finally:
        writer.close()
    frozen = open_connection(db, create=False, immutable=True)  # closed: folded into the file
    try:
        assert frozen.readonly("main")
        assert frozen.execute("SELECT name FROM tenant WHERE public_id = 't'").fetchall() == [
            ("x",)
        ]
    finally:
        frozen.close()


def test_a_read_only_knowledge_base_without_a_model_is_searched_without_vectors(
    kbmcp, tmp_path: Path
) -> None:
    """`serve --create` made it, nothing was added, then it was shipped read-only: no model was
    ever recorded and none can be, so search answers (empty) instead of failing."""
    db = tmp_path / "kb.db"
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()):
        pass  # the schema only
    db.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        before = digest(db)
        for mode in ("hybrid", "semantic", "lexical"):
            run = kbmcp("--db", db, "search", "herons", "--mode", mode, "--json")
            assert run.code == 0, run.err
            assert run.json()["results"] == []
        assert digest(db) == before
    finally:
        db.chmod(stat.S_IRUSR | stat.S_IWUSR)


# ------------------------------------------------------- a live file behind a read-only mount


def serve_through_read_only_mount(live: Path, mount_point: Path) -> StdioProcess:
    """`kbmcp serve` (stdio) reading live/kb.db through a read-only bind mount of `live`, as a
    container does with `-v /srv/kb:/kb:ro`, in a private mount namespace."""
    mount_point.mkdir()
    db = mount_point / "kb.db"
    script = (
        f"mount --bind {live} {mount_point} && mount -o remount,ro,bind {mount_point} && "
        f"exec {sys.executable} -m kbmcp --db {db} serve"
    )
    return StdioProcess(db, ["unshare", "-m", "sh", "-c", script])


def found_paths(server: StdioProcess, query: str) -> list[str]:
    result = server.call_tool("search_knowledge", {"query": query, "mode": "lexical"})
    assert "error" not in result, result
    return [hit["path"] for hit in result["results"]]


@pytest.fixture
def live_folder(corpus: Path, tmp_path: Path) -> Path:
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    probe = processes.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {tmp_path} {tmp_path}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a bind mount here: {probe.stderr.strip()}")
    live = tmp_path / "live"
    settings = Settings(db=live / "kb.db", embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder()) as ws:
        add_paths(ws, ws.local_principal(), [corpus], IngestOptions(knowledge_base="default"))
    return live


def test_a_server_on_a_read_only_mount_sees_the_hosts_writes(
    live_folder: Path, tmp_path: Path
) -> None:
    """The host keeps the file open (so its -shm exists) and writes through its own path; the
    server behind the read-only mount answers from what the host commits, across checkpoints
    and the host closing and reopening the file (before: opened immutable, it saw nothing new
    and then read "database disk image is malformed")."""
    settings = Settings(db=live_folder / "kb.db", embedder="hash")
    host = Workspace(settings, embedder=HashingEmbedder())
    server = serve_through_read_only_mount(live_folder, tmp_path / "ro")
    try:
        assert found_paths(server, "herons") == ["herons.md"]
        assert found_paths(server, "kestrels") == []
        news = tmp_path / "news"
        news.mkdir()
        (news / "kestrels.md").write_text("# Kestrels\n\nKestrels hover before they dive.\n")
        add_paths(host, host.local_principal(), [news], IngestOptions(knowledge_base="default"))
        assert found_paths(server, "kestrels") == ["kestrels.md"]

        host.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # pages move into the file
        host.close()  # the host lets go; the server's open -shm keeps the WAL in place
        host = Workspace(settings, embedder=HashingEmbedder())
        many = tmp_path / "many"
        many.mkdir()
        for number in range(60):
            (many / f"owl{number:02}.md").write_text(f"# Owl {number}\n\nOwls {number} hunt.\n")
        add_paths(host, host.local_principal(), [many], IngestOptions(knowledge_base="default"))
        host.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert len(found_paths(server, "owls")) == 10  # the default limit: all are there
        assert found_paths(server, "kestrels") == ["kestrels.md"]
        assert "malformed" not in server.stderr
    finally:
        server.stop()
        host.close()


def test_a_server_on_a_read_only_mount_without_the_shm_is_refused_clearly(
    live_folder: Path, tmp_path: Path
) -> None:
    """Nobody on the host has the file open: no -shm, and the mount cannot create one. The
    server stops at start with one line (before: it served the file as immutable, stale or
    corrupt as soon as the host wrote)."""
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    script = (
        f"mount --bind {live_folder} {mount_point} && mount -o remount,ro,bind {mount_point} && "
        f"exec {sys.executable} -m kbmcp --db {mount_point}/kb.db serve"
    )
    run = processes.run(
        ["unshare", "-m", "sh", "-c", script],
        env=subprocess_env(mount_point / "kb.db"),
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "-shm file is missing" in lines[0], run.stderr
    assert "--immutable" in lines[0] and "keep a process there that has it open" in lines[0]
