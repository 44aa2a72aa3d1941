"""watch never extracts a file twice (issue 33, item 8).

When an edit jumps the queue during a sync, the running sync commits what is ready and defers
the rest. It threw away what it had already done for a deferred file, and the next sync
extracted it again (a 117-page PDF: 89 s more at load 30) and embedded its chunks again. Now
the extraction and the vectors computed so far are carried to the sync that writes the file.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.ingest.reader import Extracted, FileBytes
from kbmcp.ingest.walker import SourceFile
from kbmcp.service import ingest, ingest_batch
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.ingest_carry import Carry
from kbmcp.workspace import Workspace
from tests.test_watch import Watcher, wait_until

BIG_WORD = "gannet"


def write_big_note(path: Path, sections: int = 40) -> None:
    body = "\n\n".join(
        f"## Part {n}\n\n" + " ".join(f"{BIG_WORD}{n} cliff{w} colony{n}-{w}" for w in range(40))
        for n in range(sections)
    )
    path.write_text(f"# Gannets\n\n{body}\n")


class HeldEmbedder(HashingEmbedder):
    """The hashing embedder that stops at the big note's first slice until `release` is set
    (so an edit can be made while that document is being embedded), and counts what it
    embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding_big = threading.Event()
        self.release = threading.Event()
        self.embedded: Counter[str] = Counter()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(BIG_WORD in text for text in texts) and not self.release.is_set():
            self.embedding_big.set()
            self.release.wait(30)
        self.embedded.update(texts)
        return super().embed(texts)


@pytest.fixture
def counted_extractions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each file's bytes were extracted (by file name)."""
    extractions: Counter[str] = Counter()
    real_extract = ingest.extract

    def extract(
        source: SourceFile, file: FileBytes, on_page: Callable[[int, int], None] | None = None
    ) -> Extracted:
        extractions[source.path.name] += 1
        return real_extract(source, file, on_page)

    monkeypatch.setattr(ingest, "extract", extract)
    monkeypatch.setattr(ingest_batch, "EMBED_SLICE", 8)
    return extractions


def test_a_deferred_file_is_not_extracted_again(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    counted_extractions: Counter[str],
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Birds\n\nThe heron waits.\n")
    write_big_note(folder / "gannets.md")
    db = tmp_path / "kb.db" if backend == "sqlite" else request.getfixturevalue("new_postgres_url")
    embedder = HeldEmbedder()
    with Workspace(Settings(db=db, embedder="hash"), embedder=embedder) as workspace:
        watcher = Watcher(workspace, folder)
        watcher.thread.start()
        try:
            assert embedder.embedding_big.wait(30), "the big note was never embedded"
            (folder / "birds.md").write_text("# Birds\n\nThe bittern booms.\n")  # an edit
            time.sleep(1.5)  # the watcher sees it (debounce), so the sync makes way for it
            embedder.release.set()
            watcher.wait_for(lambda: watcher.paths_for("bittern") == ["birds.md"])
            wait_until(lambda: "gannets.md" in watcher.paths_for(f"{BIG_WORD}7"), seconds=30)
        finally:
            embedder.release.set()
            watcher.stop.set()
            watcher.thread.join(timeout=10)
    assert watcher.errors == []
    deferred = [report.deferred for report in watcher.reports if report.deferred]
    assert deferred and deferred[0] == [folder.resolve() / "gannets.md"], watcher.reports
    assert counted_extractions["gannets.md"] == 1, counted_extractions
    twice = [text for text, count in embedder.embedded.items() if count > 1 and BIG_WORD in text]
    assert twice == []  # nor a chunk embedded twice


def carried_run(tmp_path: Path, change_it: bool) -> Carry:
    """Two adds of a folder: the first stops (interrupt) once its first file is read, which it
    carries; `change_it`: that file changes before the second."""
    folder = tmp_path / "notes"
    folder.mkdir()
    write_big_note(folder / "alpha.md")
    write_big_note(folder / "beta.md", sections=30)
    settings = Settings(db=tmp_path / "kb.db", embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder()) as workspace:
        principal = workspace.local_principal()
        carry = Carry()
        first = add_paths(
            workspace, principal, [folder], IngestOptions(), interrupt=lambda: True, carry=carry
        )
        assert sorted(path.name for path in first.deferred) == ["alpha.md", "beta.md"]
        assert [Path(source).name for source in carry.files] == ["alpha.md"]
        if change_it:
            write_big_note(folder / "alpha.md", sections=41)
        second = add_paths(workspace, principal, [folder], IngestOptions(), carry=carry)
        assert (second.added, second.deferred) == (2, [])
    return carry


def test_carried_work_is_taken_by_the_next_sync(
    tmp_path: Path, counted_extractions: Counter[str]
) -> None:
    assert carried_run(tmp_path, change_it=False).files == {}
    assert counted_extractions == {"alpha.md": 1, "beta.md": 1}


def test_a_file_changed_since_is_extracted_anew(
    tmp_path: Path, counted_extractions: Counter[str]
) -> None:
    assert carried_run(tmp_path, change_it=True).files == {}
    assert counted_extractions == {"alpha.md": 2, "beta.md": 1}
