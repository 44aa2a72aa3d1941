"""`kbmcp backup DEST`: SQLite's online backup API, safe while the file is being written."""

from __future__ import annotations

import random
import stat
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest
from kbmcp.service.backup import backup
from kbmcp.service.ingest import DocumentInput, add_documents
from kbmcp.workspace import Workspace
from tests import processes
from tests.cli_support import assert_one_line_error
from tests.index_checks import indexed_state
from tests.mcp_support import REPO_ROOT, subprocess_env
from tests.patience import ceiling
from tests.test_crash_safety import document_text

HERON = DocumentInput("heron.md", "# Heron\n\nThe heron waits in shallow water.\n")


@pytest.fixture
def source(kbmcp, tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rng = random.Random(3)
    for n in range(20):
        (corpus / f"doc{n:02}.md").write_text(document_text(rng, n, 0))
    db = tmp_path / "kb.db"
    assert kbmcp("--db", db, "add", corpus).code == 0
    return db


@pytest.mark.sqlite_only("file: backup of a file")
def test_backup_is_a_single_checked_file_with_the_same_answers(
    kbmcp, source: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.db"
    run = kbmcp("--db", source, "backup", copy, "--json")
    assert run.code == 0, run.err
    report = run.json()
    assert report["destination"] == str(copy) and report["pages"] > 0
    assert report["bytes"] == copy.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy")) == ["copy.db"]
    conn = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    assert indexed_state(copy) == indexed_state(source)
    query = ("search", "heron kestrel", "--json")
    assert (
        kbmcp("--db", copy, *query).json()["results"]
        == (kbmcp("--db", source, *query).json()["results"])
    )


@pytest.mark.sqlite_only("file: backup of a file")
def test_backup_while_an_ingest_writes_is_a_consistent_snapshot(
    kbmcp, source: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "more"
    corpus.mkdir()
    rng = random.Random(4)
    for n in range(150):
        (corpus / f"more{n:03}.md").write_text(document_text(rng, n, 1))
    writer = processes.popen(
        [sys.executable, "-m", "kbmcp", "--db", str(source), "add", str(corpus)],
        env=subprocess_env(source), cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    copies = []
    try:
        while writer.poll() is None or not copies:
            copy = tmp_path / f"snapshot-{len(copies)}.db"
            assert kbmcp("--db", source, "backup", copy).code == 0
            copies.append(copy)
    finally:
        _, stderr = writer.communicate(timeout=ceiling(120))
        processes.stop(writer)
    assert writer.returncode == 0, stderr
    sizes = [len(indexed_state(copy)) for copy in copies]  # each one consistent
    assert sizes == sorted(sizes) and sizes[-1] <= 170


@pytest.mark.sqlite_only("file: backup of a file")
def test_backup_of_a_read_only_file(kbmcp, source: Path, tmp_path: Path) -> None:
    source.chmod(stat.S_IRUSR)
    try:
        assert kbmcp("--db", source, "backup", tmp_path / "copy.db").code == 0
    finally:
        source.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert len(indexed_state(tmp_path / "copy.db")) == 20


@pytest.mark.sqlite_only("file: backup of a file")
def test_backup_into_a_folder_and_over_an_existing_file(
    kbmcp, source: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    assert kbmcp("--db", source, "backup", folder).code == 0
    assert (folder / "kb.db").exists()
    assert_one_line_error(
        kbmcp("--db", source, "backup", folder), f"{folder / 'kb.db'} already exists", "--force"
    )
    (folder / "kb.db").write_text("an old backup")
    assert kbmcp("--db", source, "backup", folder, "--force").code == 0
    assert len(indexed_state(folder / "kb.db")) == 20


@pytest.mark.parametrize(
    ("destination", "fragment"),
    [("kb.db", "is the knowledge base itself"), ("no/such/folder/kb.db", "does not exist")],
)
@pytest.mark.sqlite_only("file: backup of a file")
def test_backup_refuses_bad_destinations(
    kbmcp, source: Path, tmp_path: Path, destination: str, fragment: str
) -> None:
    assert_one_line_error(kbmcp("--db", source, "backup", tmp_path / destination), fragment)


@pytest.mark.sqlite_only("file: backup of a file")
def test_a_destination_ending_in_a_slash_names_a_folder_that_must_exist(
    kbmcp, source: Path, tmp_path: Path
) -> None:
    """Issue 32, item 5: `kbmcp backup DIR/` with DIR missing wrote a file named DIR."""
    run = kbmcp("--db", source, "backup", f"{tmp_path / 'backups'}/")
    assert_one_line_error(run, f"the folder {tmp_path / 'backups'} does not exist")
    assert not (tmp_path / "backups").exists()
    (tmp_path / "backups").mkdir()
    assert kbmcp("--db", source, "backup", f"{tmp_path / 'backups'}/").code == 0
    assert (tmp_path / "backups" / "kb.db").is_file()


@pytest.mark.sqlite_only("file: backup of a file")
def test_backup_of_a_missing_file_creates_nothing(kbmcp, tmp_path: Path) -> None:
    run = kbmcp("--db", tmp_path / "missing.db", "backup", tmp_path / "copy.db")
    assert_one_line_error(run, "no knowledge-base file")
    assert list(tmp_path.iterdir()) == []


def test_backup_of_a_postgresql_database_points_at_pg_dump_and_copy(
    kbmcp, fresh_postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The online backup copies a file; a server's database is backed up with its own tools,
    or copied into a file. Refused in one line, before anything is written."""
    settings = Settings(db=fresh_postgres_url, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), create=True) as workspace:
        add_documents(workspace, workspace.local_principal(), "notes", [HERON])
        shown = workspace.store.shown
        with pytest.raises(InvalidRequest) as caught:
            backup(workspace, tmp_path / "copy.db")
    assert "pg_dump" in caught.value.message and f"kbmcp copy {shown} FILE.db" in (
        caught.value.message
    )
    assert caught.value.details["argument"] == "--db"
    run = kbmcp("--db", fresh_postgres_url, "backup", tmp_path / "copy.db")
    assert_one_line_error(run, "is a PostgreSQL database", "pg_dump", "kbmcp copy")
    assert list(tmp_path.iterdir()) == []
