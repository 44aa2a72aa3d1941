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
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from kbmcp.errors import DiskFull, StoreError
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.store.sqlite.connection import open_connection
from kbmcp.store.sqlite.migrations import latest_version
from kbmcp.workspace import Workspace
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
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def kbmcp(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
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
