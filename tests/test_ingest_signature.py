"""Unchanged files cost a stat, not a read (issue 19, item 1): a file whose size, mtime_ns and
inode are the recorded ones is never opened; one whose signature changed but whose bytes did not
is hashed, not extracted; a change of the rules that read it (--tag, extraction or parsing
versions) reads it again."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kbmcp.ingest import reader
from kbmcp.service.ingest import IngestOptions, IngestReport, add_paths
from kbmcp.store.ingest import RACY_NS
from kbmcp.workspace import Workspace
from tests.file_tree import write_tree
from tests.pdf_fixture import write_pdf

HOUR_NS = 3600 * 10**9

PAGE = """<!DOCTYPE html><html><head><title>Pond guide</title></head><body>
<nav><a href="/">Home</a></nav><main><h1>Pond guide</h1><p>Herons {word} in the reeds.</p></main>
</body></html>"""


class Spy:
    """Counts reads (every file's bytes go through reader._read_bytes) and extractions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: Counter[str] = Counter()
        self.extractions: Counter[str] = Counter()
        real_read, real_pdf, real_html = reader._read_bytes, reader.pdf_to_text, reader.html_to_text

        def read_bytes(path: Path) -> tuple[bytes | None, str | None]:
            self.reads[path.name] += 1
            return real_read(path)

        def pdf_to_text(
            data: bytes, on_page: Callable[[int, int], None] | None = None
        ) -> reader.PdfText:  # type: ignore[name-defined]
            self.extractions["pdf"] += 1
            return real_pdf(data, on_page)

        def html_to_text(html: str) -> reader.HtmlText:  # type: ignore[name-defined]
            self.extractions["html"] += 1
            return real_html(html)

        monkeypatch.setattr(reader, "_read_bytes", read_bytes)
        monkeypatch.setattr(reader, "pdf_to_text", pdf_to_text)
        monkeypatch.setattr(reader, "html_to_text", html_to_text)

    def clear(self) -> None:
        self.reads.clear()
        self.extractions.clear()


def age(*paths: Path) -> None:
    """Give files (every file of a folder) an mtime an hour back, as files that were not just
    written have (a signature taken within 2 s of a file's mtime is not trusted, see
    `test_racy_signature_is_not_trusted`)."""
    past = time.time_ns() - HOUR_NS
    for path in paths:
        for file in path.rglob("*") if path.is_dir() else [path]:
            os.utime(file, ns=(past, past))


def make_folder(tmp_path: Path) -> Path:
    root = write_tree(
        tmp_path / "docs",
        {
            "notes.md": "# Notes\n\nHerons wait.\n",
            "guide.html": PAGE.format(word="stand"),
            "deep/more.txt": "egrets and bitterns\n",
        },
    )
    census = [["Heron census 2024: 41 nests counted"], ["Egret census 2024: 12 nests counted"]]
    write_pdf(root / "report.pdf", census, title="Census")
    age(root)
    return root


def add(workspace: Workspace, root: Path, **options: object) -> IngestReport:
    return add_paths(workspace, workspace.local_principal(), [root], IngestOptions(**options))  # type: ignore[arg-type]


def recorded_rows(workspace: Workspace) -> dict[str, tuple[int, int, int]]:
    return {
        path: (size, mtime_ns, inode)
        for path, size, mtime_ns, inode in workspace.conn.execute(
            "SELECT d.path, f.size, f.mtime_ns, f.inode FROM source_file AS f "
            "JOIN document AS d ON d.id = f.document_id"
        )
    }


def test_an_unchanged_file_is_never_opened(
    tmp_path: Path, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_folder(tmp_path)
    spy = Spy(monkeypatch)
    assert add(workspace, root).added == 4
    assert spy.extractions == {"pdf": 1, "html": 1}
    rows = recorded_rows(workspace)
    stat = (root / "report.pdf").stat()
    assert rows["report.pdf"] == (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    assert set(rows) == {"notes.md", "guide.html", "deep/more.txt", "report.pdf"}

    spy.clear()
    report = add(workspace, root)
    assert (report.unchanged, report.added, report.updated) == (4, 0, 0)
    assert spy.reads == {} and spy.extractions == {}

    # one edit: only that file is read
    (root / "notes.md").write_text("# Notes\n\nHerons wait, egrets walk.\n")
    age(root / "notes.md")
    report = add(workspace, root)
    assert (report.updated, report.unchanged) == (1, 3)
    assert spy.reads == {"notes.md": 1} and spy.extractions == {}


def test_same_bytes_with_a_new_signature_are_hashed_not_extracted(
    tmp_path: Path, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_folder(tmp_path)
    add(workspace, root)
    spy = Spy(monkeypatch)
    # touched (new mtime), and replaced by an identical copy (an editor's atomic save: new inode)
    os.utime(root / "report.pdf", ns=(time.time_ns() - HOUR_NS // 2,) * 2)
    copy = root / "guide.tmp"
    copy.write_bytes((root / "guide.html").read_bytes())
    age(copy)
    os.replace(copy, root / "guide.html")
    revisions = workspace.conn.execute("SELECT count(*) FROM revision").fetchone()[0]
    report = add(workspace, root)
    assert (report.unchanged, report.updated) == (4, 0)
    assert spy.reads == {"report.pdf": 1, "guide.html": 1}
    assert spy.extractions == {}
    assert workspace.conn.execute("SELECT count(*) FROM revision").fetchone()[0] == revisions
    stat = (root / "guide.html").stat()
    assert recorded_rows(workspace)["guide.html"] == (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    # recorded anew: the next add opens nothing
    spy.clear()
    assert add(workspace, root).unchanged == 4
    assert spy.reads == {}


def test_new_reading_rules_read_unchanged_files_again(
    tmp_path: Path, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_folder(tmp_path)
    add(workspace, root)
    spy = Spy(monkeypatch)
    report = add(workspace, root, tags=[("team", "birds")])  # --tag: every document changes
    assert report.updated == 4 and len(spy.reads) == 4
    spy.clear()
    assert add(workspace, root, tags=[("team", "birds")]).unchanged == 4
    assert spy.reads == {}
    # a kbmcp upgrade that extracts HTML differently reads every HTML page again, and only those
    monkeypatch.setitem(reader.EXTRACTION_VERSIONS, "html", 99)
    report = add(workspace, root, tags=[("team", "birds")])
    assert report.unchanged == 4  # the same text came out: nothing new is written
    assert spy.reads == {"guide.html": 1} and spy.extractions == {"html": 1}
    spy.clear()
    assert add(workspace, root, tags=[("team", "birds")]).unchanged == 4
    assert spy.reads == {}


def test_a_document_without_a_recorded_file_is_read_once(
    tmp_path: Path, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files indexed before migration 9 (no source_file rows) are read on the next add, then
    recorded; documents written from text or archived are never skipped by a stale row."""
    root = make_folder(tmp_path)
    add(workspace, root)
    with workspace.lock:
        workspace.conn.execute("DELETE FROM source_file")
    spy = Spy(monkeypatch)
    assert add(workspace, root).unchanged == 4
    assert len(spy.reads) == 4 and len(recorded_rows(workspace)) == 4
    spy.clear()
    assert add(workspace, root).unchanged == 4
    assert spy.reads == {}
    # an archived document comes back when its file is added again: read, not skipped
    (root / "notes.md").rename(tmp_path / "notes.md")
    assert add(workspace, root, prune=True).archived == 1
    (tmp_path / "notes.md").rename(root / "notes.md")
    report = add(workspace, root)
    assert report.updated == 1 and spy.reads == {"notes.md": 1}


def test_racy_signature_is_not_trusted(
    tmp_path: Path, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written just before its signature was taken may change again without a new size
    or mtime (coarse timestamps): its bytes are compared on the next add. An edit that keeps
    the size, put back to the recorded mtime, is still found."""
    root = write_tree(tmp_path / "docs", {"a.md": "# A\n\nheron\n"})
    add(workspace, root)
    stat = (root / "a.md").stat()
    assert time.time_ns() - stat.st_mtime_ns < RACY_NS  # written just now: racy
    (root / "a.md").write_text("# A\n\negret\n")  # same size
    os.utime(root / "a.md", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime (same inode)
    spy = Spy(monkeypatch)
    report = add(workspace, root)
    assert report.updated == 1 and spy.reads == {"a.md": 1}
    text = workspace.conn.execute(
        "SELECT r.content FROM document AS d JOIN revision AS r ON r.id = d.current_revision_id"
    ).fetchone()[0]
    assert "egret" in text
