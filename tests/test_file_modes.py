"""Files private by default (issue 16, item 6): with the common umask 022 the database, its
-wal and -shm, and backups are created 0600 and the folders kbmcp creates 0700; `doctor` warns
about an existing file that others may read."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbmcp.service.backup import backup
from tests.mcp_support import hash_workspace
from tests.search_corpus import ingest, write_small_corpus

pytestmark = pytest.mark.sqlite_only("file: file modes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_new_file_its_wal_shm_and_folders_are_private(tmp_path: Path, umask_022: None) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    db = existing / "new" / "nested" / "kb.db"
    with hash_workspace(db) as workspace:
        ingest(workspace, write_small_corpus(tmp_path / "corpus"))
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
        assert {path.name: oct(mode(path)) for path in files} == {
            path.name: "0o600" for path in files
        }
        assert oct(mode(existing / "new")) == oct(mode(existing / "new" / "nested")) == "0o700"
        copy = backup(workspace, tmp_path / "copy.db").destination
    assert oct(mode(Path(copy))) == "0o600"
    assert oct(mode(existing)) == "0o755"  # a folder kbmcp did not create is left alone


def test_an_existing_files_mode_is_left_as_its_owner_set_it(
    tmp_path: Path, umask_022: None
) -> None:
    db = tmp_path / "kb.db"
    hash_workspace(db).close()
    db.chmod(0o640)
    with hash_workspace(db) as workspace:
        ingest(workspace, write_small_corpus(tmp_path / "corpus"))
        assert oct(mode(db)) == oct(mode(Path(f"{db}-wal"))) == "0o640"


def test_doctor_warns_about_files_others_can_read(kbmcp, tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    hash_workspace(db).close()
    private = kbmcp("--db", db, "doctor")
    assert private.code == 0 and "warning" not in private.err
    assert kbmcp("--db", db, "doctor", "--json").json()["warnings"] == []

    db.chmod(0o644)
    shared = kbmcp("--db", db, "doctor")
    assert shared.code == 0
    assert shared.err.splitlines() == [
        f"warning: {db} has mode 0644: other users may read every document in it; "
        f"restrict it with `chmod go= {db}`"
    ]
    assert kbmcp("--db", db, "doctor", "--json").json()["warnings"] == [shared.err[9:].strip()]
