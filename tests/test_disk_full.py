"""A full disk and inconsistent schemas (issue 20, item 5): one clear line saying what is full
and that nothing stored was lost; a new file complete or absent; a newer or inconsistent schema
refused before anything is written.

A full disk is made two ways: `PRAGMA max_page_count` (SQLite answers SQLITE_FULL exactly as
for a full disk, on any machine) and, where this process may mount one, a real small tmpfs.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

from kbmcp.errors import DiskFull, StoreError
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.store.sqlite.connection import open_connection
from kbmcp.store.sqlite.migrations import latest_version
from kbmcp.workspace import Workspace
from tests import processes
from tests.cli_support import Run, cli_runner
from tests.index_checks import indexed_state
from tests.mcp_support import REPO_ROOT, hash_workspace, subprocess_env
from tests.search_corpus import ingest, write_small_corpus

pytestmark = pytest.mark.sqlite_only("file: a full disk and SQLite's full-database errors")

WORDS = [
    "heron",
    "kestrel",
    "sqlite",
    "vector",
    "index",
    "chunk",
    "search",
    "backup",
    "restore",
    "journal",
    "replica",
]


def write_corpus(root: Path, files: int, paragraphs: int = 12) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for number in range(files):
        body = "\n\n".join(
            " ".join(WORDS[(number * 7 + p * 3 + w) % len(WORDS)] + str(w) for w in range(90))
            for p in range(paragraphs)
        )
        (root / f"doc{number:03}.md").write_text(f"# Document {number}\n\n{body}\n")
    return root


def limit_growth(workspace: Workspace, pages: int) -> None:
    """The workspace's connection may add only `pages` pages to the file from now on."""
    conn = workspace.conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    used = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {used + pages}")


def assert_intact(db: Path) -> None:
    conn = open_connection(db, create=False)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO chunk_fts(chunk_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_a_full_database_is_one_clear_error_and_nothing_is_lost(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    with hash_workspace(db) as workspace:
        ingest(workspace, write_small_corpus(tmp_path))
        before = indexed_state(db)
        limit_growth(workspace, pages=8)
        with pytest.raises(DiskFull) as raised:
            add_paths(
                workspace,
                workspace.local_principal(),
                [write_corpus(tmp_path / "big", files=40)],
                IngestOptions(knowledge_base="default"),
            )
    message = raised.value.message
    assert "\n" not in message
    assert message.startswith(f"the disk holding {db} is full (")
    assert "nothing stored before is lost" in message
    assert raised.value.details["path"] == str(db)
    assert indexed_state(db) == before
    assert_intact(db)


def test_a_full_vector_index_is_the_same_clear_error(tmp_path: Path) -> None:
    """sqlite-vec reports its own full disk as "Could not insert a new vector chunk": the first
    vector needs a whole block (1024 vectors x 384 dimensions x 4 bytes)."""
    db = tmp_path / "kb.db"
    with hash_workspace(db) as workspace:
        workspace.ensure_model()  # the vec0 index exists, with no block of vectors yet
        limit_growth(workspace, pages=64)  # room for a document, not for 1.5 MiB of vectors
        with pytest.raises(DiskFull) as raised:
            ingest(workspace, write_small_corpus(tmp_path))
    message = raised.value.message
    assert "is full" in message and "the vector index needed 1.5 MiB more" in message
    assert raised.value.details["needed_bytes"] == 1024 * 384 * 4
    assert indexed_state(db) == {}
    assert_intact(db)


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `folder` (needs root and CAP_SYS_ADMIN: skipped otherwise)."""
    folder.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    mounted = processes.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        processes.run(["umount", "-l", str(folder)], check=False, timeout=60)


def kbmcp(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), *args],
        env=subprocess_env(db),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_add_on_a_real_full_disk_says_so_in_one_line(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "3m") as disk:
        db = disk / "kb.db"
        assert kbmcp(db, "add", str(write_small_corpus(tmp_path))).returncode == 0
        before = indexed_state(db)
        added = kbmcp(db, "add", str(write_corpus(tmp_path / "big", files=80)))
        assert added.returncode == 1
        lines = added.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: the disk holding {db} is full ("), (
            added.stderr
        )
        assert "nothing stored before is lost" in lines[0]
        assert indexed_state(db) == before
        assert kbmcp(db, "doctor").returncode == 0
        assert_intact(db)


def test_a_new_file_on_a_full_disk_is_not_left_behind(tmp_path: Path) -> None:
    """Created and migrated in one transaction: with no room for the schema, no file remains
    (before: an empty or half-migrated file on which even `doctor` failed)."""
    for size in ("40k", "160k"):  # no room for the schema, or room for part of it
        with small_disk(tmp_path / f"disk-{size}", size) as disk:
            db = disk / "kb.db"
            added = kbmcp(db, "add", str(write_small_corpus(tmp_path)))
            assert added.returncode == 1
            assert "is full" in added.stderr and len(added.stderr.splitlines()) == 1
            assert list(disk.iterdir()) == []
            doctor = kbmcp(db, "doctor")
            assert "there is no knowledge-base file" in doctor.stderr


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rollback_journal_file(path: Path, version: int) -> None:
    """A kbmcp file in rollback-journal mode (as `kbmcp backup` makes) claiming `version`."""
    conn = open_connection(path)
    conn.execute("PRAGMA journal_mode = DELETE").fetchall()
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


def test_a_newer_schema_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    rollback_journal_file(db, latest_version() + 1)
    digest = file_digest(db)
    with pytest.raises(StoreError, match="newer than this kbmcp understands"):
        open_connection(db)
    assert file_digest(db) == digest
    assert not Path(f"{db}-wal").exists()  # not switched to WAL


def test_a_schema_that_does_not_match_its_version_is_named(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    rollback_journal_file(db, 3)  # the tables of the latest version, the number of version 3
    digest = file_digest(db)
    with pytest.raises(StoreError) as raised:
        open_connection(db)
    message = raised.value.message
    assert "says it has schema version 3, but its tables do not match" in message
    assert "already has" in message and "table document_metadata" in message
    assert "Restore it from a backup" in message
    assert file_digest(db) == digest

    db.unlink()
    rollback_journal_file(db, latest_version())
    conn = apsw.Connection(str(db))
    conn.execute("DROP TABLE id_key")
    conn.close()
    with pytest.raises(StoreError, match="missing table id_key"):
        open_connection(db)


# ------------------------------------------------------------ a new file, whatever the space left
# (issue 33, item 4: with ~16 KiB free, `kbmcp add` said "unexpected IOError: disk I/O error"
# and left a 4 KiB new.db with its -wal and -shm, which `doctor` could not open; with a few
# hundred KiB it left the empty knowledge base its failed first add had created)


def leave_free(disk: Path, free: int) -> None:
    """Fill `disk` until `free` bytes are left (a tmpfs counts whole pages)."""
    available = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as filler:
        filler.truncate(0)
        remaining = available - free
        block = b"\0" * (1 << 20)
        while remaining > 0:
            remaining -= filler.write(block[: min(len(block), remaining)])
    assert abs(shutil.disk_usage(disk).free - free) <= 4096


def assert_one_full_disk_line(run: subprocess.CompletedProcess[str], db: Path) -> None:
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"error: the disk holding {db} is full ("), run.stderr
    assert "nothing stored before is lost" in lines[0]


@pytest.mark.parametrize(
    "free",
    [0, 16 * 1024, 100 * 1024, 400 * 1024, 1024 * 1024],
    ids=["0", "16K", "100K", "400K", "1M"],
)
def test_a_first_add_on_a_nearly_full_disk_leaves_no_file(tmp_path: Path, free: int) -> None:
    """Not even the vector index's first block fits (1.5 MiB): the first add fails whole, and
    the new file it created goes, whatever failed first (the -shm at 16 KiB, the schema at
    100 KiB, the documents at 400 KiB and 1 MiB)."""
    corpus = write_small_corpus(tmp_path)
    with small_disk(tmp_path / "disk", "2m") as disk:
        leave_free(disk, free)
        db = disk / "new.db"
        added = kbmcp(db, "add", str(corpus))
        assert_one_full_disk_line(added, db)
        assert sorted(path.name for path in disk.iterdir()) == ["filler"]
        doctor = kbmcp(db, "doctor")
        assert "there is no knowledge-base file" in doctor.stderr


@pytest.mark.parametrize("free_kib", [4000, 6000, 7000])
def test_a_first_add_that_wrote_some_documents_keeps_a_complete_file(
    tmp_path: Path, free_kib: int
) -> None:
    """Room for the vector block and some documents: those committed stay, whole and
    searchable (the file is complete and opens); the rest is the same one-line error. (With
    6000 KiB, sqlite-vec's failed vector write rolled the whole batch back and the next COMMIT
    said "unexpected SQLError: cannot commit - no transaction is active".)"""
    big = write_corpus(tmp_path / "big", files=80)
    with small_disk(tmp_path / "disk", "8m") as disk:
        leave_free(disk, free_kib * 1024)
        db = disk / "new.db"
        added = kbmcp(db, "add", str(big))
        assert_one_full_disk_line(added, db)
        assert kbmcp(db, "doctor").returncode == 0
        state = indexed_state(db)
        assert 0 < len(state) < 80 and {status for status, _ in state.values()} == {"published"}


def test_a_new_file_is_removed_only_when_it_holds_nothing_and_nobody_has_it(
    tmp_path: Path,
) -> None:
    from kbmcp.store.sqlite.new_file import remove_if_empty

    empty = tmp_path / "empty.db"
    with hash_workspace(empty) as workspace:
        workspace.local_principal()  # a tenant, no documents
        assert not remove_if_empty(empty)  # open here: kept
    assert remove_if_empty(empty) and not empty.exists()
    assert not list(tmp_path.glob("empty.db*"))

    used = tmp_path / "used.db"
    with hash_workspace(used) as workspace:
        ingest(workspace, write_small_corpus(tmp_path))
    assert not remove_if_empty(used) and used.exists()

    foreign = tmp_path / "foreign.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE notes (x)")
    conn.close()
    assert not remove_if_empty(foreign) and foreign.exists()

    header = tmp_path / "header.db"
    header.touch()
    assert remove_if_empty(header) and not header.exists()


@pytest.fixture
def kbmcp_in_process(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    return cli_runner(capsys)


def test_a_failed_first_add_removes_the_file_it_created(
    kbmcp_in_process: Callable[..., Run], tmp_path: Path
) -> None:
    """Any failure of the command that created the file, not only a full disk: a path that
    does not exist left an empty knowledge base behind."""
    db = tmp_path / "new.db"
    run = kbmcp_in_process("--db", db, "add", tmp_path / "missing")
    assert run.code == 1 and "no such file or folder" in run.err
    assert not list(tmp_path.glob("new.db*"))
    existing = tmp_path / "kb.db"
    assert kbmcp_in_process("--db", existing, "add", write_small_corpus(tmp_path)).code == 0
    assert kbmcp_in_process("--db", existing, "add", tmp_path / "missing").code == 1
    assert existing.exists()  # not created by that command: kept


@pytest.mark.parametrize(
    "error",
    [
        apsw.FullError("database or disk is full"),
        apsw.SQLError("Internal sqlite-vec error: could not write vector blob on main.x.1"),
        apsw.SQLError("Could not insert a new vector chunk"),
    ],
)
def test_full_disk_errors_are_recognised(error: apsw.Error) -> None:
    from kbmcp.store.sqlite.disk_full import is_disk_full

    assert is_disk_full(error)
    wrapped = apsw.SQLError("no such savepoint: _apsw-0")
    wrapped.__context__ = error
    assert is_disk_full(wrapped)
    assert not is_disk_full(apsw.SQLError("no such table: x"))
    assert not is_disk_full(apsw.IOError("disk I/O error"))
    assert is_disk_full(apsw.IOError("disk I/O error"), system_errno=28)  # ENOSPC
    shm = apsw.IOError("disk I/O error")
    shm.extendedresult = apsw.SQLITE_IOERR_SHMSIZE  # (the -shm could not grow)
    assert is_disk_full(shm)
