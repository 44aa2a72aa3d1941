"""`kbmcp watch`: edits, new files, renames and deletions reach search (within 5 s on an idle
machine; the tests wait for each sync's report, up to a ceiling that grows with the load:
tests/patience.py); atomic saves and the database inside the watched folder do not confuse it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import IngestOptions, IngestReport
from kbmcp.service.search import search
from kbmcp.service.watch import error_line, watch_paths
from kbmcp.workspace import Workspace
from tests import processes
from tests.patience import ceiling, wait_until
from tests.server_process import default_sigint

FOLLOW_SECONDS = 5.0  # a change reaches search within this on an idle machine


class Watcher:
    def __init__(self, workspace: Workspace, folder: Path) -> None:
        self.workspace = workspace
        self.reports: list[IngestReport] = []
        self.errors: list[Exception] = []
        self.synced = threading.Condition()  # notified at each sync's report or error
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=watch_paths,
            args=(
                workspace,
                workspace.local_principal(),
                [folder],
                IngestOptions(knowledge_base="w"),
            ),
            kwargs={"on_report": self._reported, "on_error": self._failed, "stop": self.stop},
            daemon=True,
        )

    def paths_for(self, word: str) -> list[str]:
        request = SearchRequest(word, mode="lexical")
        return [
            r.path
            for r in search(self.workspace, self.workspace.local_principal(), request).results
        ]

    def _reported(self, report: IngestReport) -> None:
        with self.synced:
            self.reports.append(report)
            self.synced.notify_all()

    def _failed(self, error: Exception) -> None:
        with self.synced:
            self.errors.append(error)
            self.synced.notify_all()

    def wait_for(self, condition: Callable[[], bool]) -> None:
        """Until `condition` holds, checked now and after each sync (what a sync changes is
        committed before its report): the event, with a ceiling for a watcher that misses
        a change."""
        limit = ceiling(FOLLOW_SECONDS)
        with self.synced:
            if not self.synced.wait_for(condition, timeout=limit):
                raise AssertionError(f"not within {limit:.0f} s; reports: {self.reports}")


@pytest.fixture
def watched(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[Watcher, Path]]:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Birds\n\nThe heron waits.\n")
    # SQLite: the database lives inside the watched folder: its writes must not trigger syncs.
    # PostgreSQL: the same changes reach the database through the same ingest.
    db = folder / "kb.db" if backend == "sqlite" else request.getfixturevalue("fresh_postgres_url")
    settings = Settings(db=db, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder()) as workspace:
        watcher = Watcher(workspace, folder)
        watcher.thread.start()
        try:
            watcher.wait_for(lambda: len(watcher.reports) >= 1)
            yield watcher, folder
        finally:
            watcher.stop.set()
            watcher.thread.join(timeout=ceiling(10))
    assert not watcher.thread.is_alive()


def test_search_follows_edits_creations_renames_and_deletions(
    watched: tuple[Watcher, Path],
) -> None:
    watcher, folder = watched
    assert watcher.reports[0].added == 1
    assert watcher.paths_for("heron") == ["birds.md"]

    (folder / "birds.md").write_text("# Birds\n\nThe egret waits.\n")  # edit
    watcher.wait_for(lambda: watcher.paths_for("egret") == ["birds.md"])
    assert watcher.paths_for("heron") == []

    (folder / "sub").mkdir()
    (folder / "sub" / "fish.md").write_text("# Fish\n\nA pike hunts.\n")  # create
    watcher.wait_for(lambda: watcher.paths_for("pike") == ["sub/fish.md"])

    (folder / "sub" / "fish.md").rename(folder / "sub" / "pond.md")  # rename
    watcher.wait_for(lambda: watcher.paths_for("pike") == ["sub/pond.md"])

    (folder / "birds.md").unlink()  # delete
    watcher.wait_for(lambda: watcher.paths_for("egret") == [])
    status = watcher.workspace.conn.execute(
        "SELECT path, status FROM document ORDER BY path"
    ).fetchall()
    assert status == [
        ("birds.md", "archived"),
        ("sub/fish.md", "archived"),
        ("sub/pond.md", "published"),
    ]
    assert watcher.errors == []


def test_an_atomic_save_is_one_update(watched: tuple[Watcher, Path]) -> None:
    watcher, folder = watched
    syncs = len(watcher.reports)
    temporary = folder / ".birds.md.swp"
    temporary.write_text("# Birds\n\nThe bittern booms.\n")
    os.replace(temporary, folder / "birds.md")  # how editors save
    watcher.wait_for(lambda: watcher.paths_for("bittern") == ["birds.md"])
    revisions = watcher.workspace.conn.execute(
        "SELECT count(*) FROM revision r JOIN document d ON d.id = r.document_id "
        "WHERE d.path = 'birds.md'"
    ).fetchone()[0]
    assert revisions == 2
    assert [p for (p,) in watcher.workspace.conn.execute("SELECT path FROM document")] == [
        "birds.md"
    ]
    time.sleep(1.0)  # no sync loop from the database's own writes
    assert len(watcher.reports) - syncs <= 2


def test_a_lost_database_connection_is_one_error_and_watching_goes_on(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL restarts, fails over or drops idle connections: the sync that finds its
    connection gone is reported in one line (not a dead watcher thread), and the next change is
    synced on a new connection."""
    import psycopg

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Birds\n\nThe heron waits.\n")
    settings = Settings(db=fresh_postgres_url, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder()) as workspace:
        watcher = Watcher(workspace, folder)
        watcher.thread.start()
        try:
            watcher.wait_for(lambda: len(watcher.reports) >= 1)
            mine = workspace.conn.info.backend_pid  # this thread's, for the searches below
            with psycopg.connect(fresh_postgres_url, autocommit=True) as admin:
                dropped = admin.execute(TERMINATE_OTHERS, {"keep": mine}).fetchall()
            assert dropped  # the watcher's connection
            (folder / "birds.md").write_text("# Birds\n\nThe egret waits.\n")
            watcher.wait_for(lambda: len(watcher.errors) == 1)
            (error,) = watcher.errors
            assert isinstance(error, psycopg.OperationalError)
            assert "\n" not in error_line(error) and "terminat" in error_line(error)
            (folder / "birds.md").write_text("# Birds\n\nThe bittern booms.\n")
            watcher.wait_for(lambda: watcher.paths_for("bittern") == ["birds.md"])
            assert watcher.thread.is_alive()
        finally:
            watcher.stop.set()
            watcher.thread.join(timeout=ceiling(10))
    assert len(watcher.errors) == 1


# Every other session of the test's database, as a server restart would end them.
TERMINATE_OTHERS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %(keep)s
"""


def test_watch_needs_folders(tmp_path: Path, workspace: Workspace) -> None:
    (tmp_path / "a.md").write_text("# A")
    with pytest.raises(InvalidRequest, match="watch needs a folder, not a file"):
        watch_paths(workspace, workspace.local_principal(), [tmp_path / "a.md"])
    with pytest.raises(InvalidRequest, match="not a missing path"):
        watch_paths(workspace, workspace.local_principal(), [tmp_path / "nope"])


def test_serve_watch_indexes_in_the_background(workspace: Workspace, tmp_path: Path) -> None:
    from kbmcp.cli.serve import watching

    folder = tmp_path / "served"
    folder.mkdir()
    principal = workspace.local_principal()

    def hits(word: str) -> list[str]:
        request = SearchRequest(word, mode="lexical")
        return [r.path for r in search(workspace, principal, request).results]

    with watching(workspace, [folder], "served"):
        (folder / "a.md").write_text("# A\n\nkingfisher\n")
        wait_until(lambda: hits("kingfisher") == ["a.md"], FOLLOW_SECONDS, "the new file")
    names = [n for (n,) in workspace.conn.execute("SELECT name FROM knowledge_base")]
    assert names == ["served"]
    with (
        pytest.raises(InvalidRequest, match="watch needs a folder"),
        watching(workspace, [tmp_path / "missing"], "served"),
    ):
        pass


def test_kbmcp_watch_as_a_process(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nosprey\n")
    db = tmp_path / "kb.db"
    env = {**os.environ, "KBMCP_EMBEDDER": "hash", "PYTHONUNBUFFERED": "1"}
    process = processes.popen(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "watch", str(folder), "--kb", "w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_sigint,
    )
    try:
        assert process.stderr is not None and process.stdout is not None
        out, err = processes.Lines(process.stdout), processes.Lines(process.stderr)
        assert " w: added 1, updated 0, unchanged 0, archived 0" in out.next()  # the first sync
        assert err.next().startswith(f"watching {folder}")
        (folder / "b.md").write_text("# B\n\nplover\n")
        assert " w: added 1, " in out.next(FOLLOW_SECONDS)  # the change's sync
        process.send_signal(signal.SIGINT)
        rest = err.rest()
        assert process.wait(timeout=ceiling(10)) == 0
    finally:
        processes.stop(process)
    assert "stopped watching" in rest and "Traceback" not in rest


def test_a_change_touches_only_the_files_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside a folder of PDFs and pages, an edit reads the edited file and nothing else; an
    ignore file's change re-checks its folder; a renamed folder moves its documents."""
    from kbmcp.ingest import reader
    from tests.pdf_fixture import write_pdf

    folder = tmp_path / "notes"
    (folder / "papers").mkdir(parents=True)
    for i in range(5):
        write_pdf(folder / "papers" / f"p{i}.pdf", [[f"paper {i} about herons and their nests"]])
        (folder / f"page{i}.html").write_text(f"<main><h1>Page {i}</h1><p>egret {i}</p></main>")
    (folder / "birds.md").write_text("# Birds\n\nThe heron waits.\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9  # (files written just now are hashed again)
    for path in folder.rglob("*"):
        os.utime(path, ns=(an_hour_ago, an_hour_ago))
    reads: list[str] = []
    real_read_bytes = reader._read_bytes

    def counting_read_bytes(path: Path) -> tuple[bytes | None, str | None]:
        reads.append(path.relative_to(folder).as_posix())
        return real_read_bytes(path)

    monkeypatch.setattr(reader, "_read_bytes", counting_read_bytes)
    settings = Settings(db=tmp_path / "kb.db", embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder()) as workspace:
        watcher = Watcher(workspace, folder)
        watcher.thread.start()
        try:
            watcher.wait_for(lambda: len(watcher.reports) >= 1)
            assert watcher.reports[0].added == 11
            reads.clear()
            (folder / "birds.md").write_text("# Birds\n\nThe bittern booms.\n")
            watcher.wait_for(lambda: watcher.paths_for("bittern") == ["birds.md"])
            assert reads == ["birds.md"]
            assert watcher.reports[-1].unchanged == 0  # nothing else was looked at

            reads.clear()
            (folder / ".gitignore").write_text("page1.html\n")
            watcher.wait_for(lambda: "page1.html" not in watcher.paths_for("egret"))
            assert len(watcher.paths_for("egret")) == 4
            # only birds.md, written within 2 s of its last sync, is opened again (to hash it)
            assert set(reads) <= {"birds.md"}

            (folder / "papers").rename(folder / "articles")
            moved = [f"articles/p{i}.pdf" for i in range(5)]
            watcher.wait_for(lambda: sorted(watcher.paths_for("paper")) == moved)
        finally:
            watcher.stop.set()
            watcher.thread.join(timeout=ceiling(10))
    assert watcher.errors == []


class SlowEmbedder(HashingEmbedder):
    """The hashing embedder at about the default model's pace on two cores (~30 texts/s)."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        time.sleep(len(texts) / 30)
        return super().embed(texts)


def test_a_burst_is_searchable_file_by_file_and_an_edit_jumps_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `git pull` of 90 files is committed in small batches as it is embedded (not all at
    once at the end), and an edit made during the burst is searchable before the burst ends.
    (Time scaled down 4x: slices of 8 inputs, a commit at least every 0.5 s.)"""
    from kbmcp.service import ingest_batch

    monkeypatch.setattr(ingest_batch, "EMBED_SLICE", 8)
    monkeypatch.setattr(ingest_batch, "COMMIT_SECONDS", 0.5)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Birds\n\nThe heron waits.\n")
    settings = Settings(db=tmp_path / "kb.db", embedder="hash")
    with Workspace(settings, embedder=SlowEmbedder()) as workspace:
        watcher = Watcher(workspace, folder)
        watcher.thread.start()
        try:
            watcher.wait_for(lambda: len(watcher.reports) >= 1)
            pulled = folder / "pulled"
            pulled.mkdir()
            for i in range(90):
                (pulled / f"n{i:02}.md").write_text(f"# Note {i}\n\nkittiwake number {i}\n")

            def burst_searchable() -> int:
                return published_under(tmp_path / "kb.db", "pulled/")

            # the first files are searchable while most of the burst is still being embedded
            wait_until(lambda: burst_searchable() > 0, 30, "the burst's first files")
            assert burst_searchable() < 90
            (folder / "birds.md").write_text("# Birds\n\nThe bittern booms.\n")  # an edit
            wait_until(lambda: watcher.paths_for("bittern") == ["birds.md"], 30, "the edit")
            at_edit = burst_searchable()
            wait_until(lambda: burst_searchable() == 90, 60, "the whole burst")
        finally:
            watcher.stop.set()
            watcher.thread.join(timeout=ceiling(10))
    assert at_edit < 90, "the edit waited for the whole burst"
    assert watcher.errors == []
    status = workspace_paths(tmp_path / "kb.db")
    assert len(status) == 91 and set(status.values()) == {"published"}


def published_under(db: Path, prefix: str) -> int:
    """Documents under `prefix` that searches find (published, in the indexes)."""
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        return ws.conn.execute(
            "SELECT count(DISTINCT d.path) FROM indexed_chunk AS i "
            "JOIN document AS d ON d.id = i.document_id WHERE d.path LIKE :prefix || '%'",
            {"prefix": prefix},
        ).fetchone()[0]


def workspace_paths(db: Path) -> dict[str, str]:
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        return dict(ws.conn.execute("SELECT path, status FROM document").fetchall())
