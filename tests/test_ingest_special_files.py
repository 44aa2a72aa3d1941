"""FIFOs, sockets and devices never hang ingest (issue 33, item 7).

`mkfifo x/pipe.md; kbmcp add x --dry-run` hung forever: the reader opened anything with a
matching name, and opening a FIFO for reading waits for a writer. So did `add` and `watch` (a
FIFO in a watched folder froze every later sync). Only regular files are read; the others are
skipped with their type as the reason, without being opened.

The CLI runs as a subprocess with a time limit: a hang is a failure, not a stuck suite."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.ingest.reader import read_file
from kbmcp.ingest.walker import special_file_reason
from kbmcp.workspace import Workspace
from tests import processes
from tests.mcp_support import REPO_ROOT, subprocess_env
from tests.patience import ceiling
from tests.test_watch import Watcher

HANG_SECONDS = 60  # far more than any of these takes; only a hang reaches it

FIFO = "not a regular file (FIFO)"
SOCKET = "not a regular file (socket)"
DEVICE = "not a regular file (character device)"


@contextlib.contextmanager
def special_folder(root: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A folder with one note and special files named like notes: a FIFO, a link to it, a
    socket and (where this process may make one) /dev/zero's device, which never ends. Yields
    the folder and the reason each special file must be skipped with. Afterwards a reader still
    blocked on the FIFO (a failing run) is released, so the test ends."""
    folder = root / "x"
    folder.mkdir()
    (folder / "note.md").write_text("# Note\n\nThe kittiwake nests on cliffs.\n")
    os.mkfifo(folder / "pipe.md")
    (folder / "link.md").symlink_to("pipe.md")
    expected = {"pipe.md": FIFO, "link.md": FIFO, "sock.md": SOCKET}
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "sock.md"))
    try:
        os.mknod(folder / "zero.md", stat.S_IFCHR | 0o644, os.makedev(1, 5))
        expected["zero.md"] = DEVICE
    except OSError as exc:  # not root, or no CAP_MKNOD: the FIFO and socket still count
        assert exc.errno in (errno.EPERM, errno.EACCES), exc
    try:
        yield folder, expected
    finally:
        listener.close()
        release_readers(folder / "pipe.md")


def release_readers(fifo: Path) -> None:
    """Open the FIFO for writing (and close it): a reader blocked opening it gets end of file."""
    for _ in range(20):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader waiting
            return


def kbmcp(db: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), *args],
        env=subprocess_env(db),  # type: ignore[arg-type]  (a URL is passed on as text)
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )


def test_dry_run_skips_special_files_with_their_type(tmp_path: Path) -> None:
    with special_folder(tmp_path) as (folder, expected):
        preview = kbmcp(tmp_path / "kb.db", "add", str(folder), "--dry-run", "--json")
    assert preview.returncode == 0, preview.stderr
    listed = json.loads(preview.stdout)
    assert [file["path"] for file in listed["files"]] == ["note.md"]
    assert {item["path"]: item["reason"] for item in listed["skipped"]} == expected
    assert not (tmp_path / "kb.db").exists()


def test_add_indexes_the_regular_files_and_skips_the_rest(
    backend_db: Path | str, tmp_path: Path
) -> None:
    with special_folder(tmp_path) as (folder, expected):
        added = kbmcp(backend_db, "add", str(folder), "--json")
        named = kbmcp(backend_db, "add", str(folder / "pipe.md"), "--json")
    assert added.returncode == 0, added.stderr
    report = json.loads(added.stdout)
    assert report["added"] == 1
    reasons: dict[str, int] = {}
    for reason in expected.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    assert report["skipped"] == reasons
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["skipped"] == {FIFO: 1}


def test_a_fifo_in_a_watched_folder_does_not_stop_the_syncs(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    db = tmp_path / "kb.db" if backend == "sqlite" else request.getfixturevalue("new_postgres_url")
    with (
        special_folder(tmp_path) as (folder, _expected),
        Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as workspace,
    ):
        watcher = Watcher(workspace, folder)
        watcher.thread.start()
        try:
            watcher.wait_for(lambda: watcher.paths_for("kittiwake") == ["note.md"])
            (folder / "note.md").write_text("# Note\n\nThe fulmar glides.\n")  # an edit
            os.mkfifo(folder / "another.md")  # a FIFO made while watching
            watcher.wait_for(lambda: watcher.paths_for("fulmar") == ["note.md"])
        finally:
            watcher.stop.set()
            release_readers(folder / "another.md")
            release_readers(folder / "pipe.md")
            watcher.thread.join(timeout=ceiling(10))
    assert not watcher.thread.is_alive()
    assert watcher.errors == []


def test_a_path_replaced_by_a_fifo_after_the_walk_is_not_opened_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The type is checked before opening and again on the descriptor: a file swapped for a
    FIFO between the check and the open is opened without blocking, and skipped."""
    from kbmcp.ingest import reader

    fifo = tmp_path / "swapped.md"
    os.mkfifo(fifo)
    checks: list[int] = []

    def swapped_after_the_first_check(mode: int) -> str | None:
        checks.append(mode)
        return None if len(checks) == 1 else special_file_reason(mode)  # (a file, at first)

    monkeypatch.setattr(reader, "special_file_reason", swapped_after_the_first_check)
    outcome: list[object] = []
    reader = threading.Thread(target=lambda: outcome.append(read_file(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=HANG_SECONDS)
    release_readers(fifo)
    assert outcome and outcome[0].data is None  # type: ignore[attr-defined]
    assert outcome[0].reason == FIFO  # type: ignore[attr-defined]
    assert len(checks) == 2


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        (stat.S_IFREG | 0o644, None),
        (stat.S_IFIFO | 0o644, FIFO),
        (stat.S_IFSOCK | 0o755, SOCKET),
        (stat.S_IFCHR | 0o600, DEVICE),
        (stat.S_IFBLK | 0o600, "not a regular file (block device)"),
        (stat.S_IFDIR | 0o755, "not a regular file (folder)"),
    ],
)
def test_special_file_reasons(mode: int, reason: str | None) -> None:
    assert special_file_reason(mode) == reason
