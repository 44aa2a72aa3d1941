"""`add_paths`: walking, parsing, revisions, vector reuse, prune, offsets, atomicity, models."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw
import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder, Embedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest, ModelMismatch
from kbmcp.ingest.chunker import ChunkingOptions
from kbmcp.ingest.parsing import ParsedDocument
from kbmcp.ingest.walker import WalkReport
from kbmcp.service import ingest as ingest_module
from kbmcp.service import ingest_batch
from kbmcp.service.admin import reembed
from kbmcp.service.ingest import IngestOptions, IngestReport, add_paths
from kbmcp.service.listing import list_documents
from kbmcp.service.read import read_document
from kbmcp.store.sqlite import index as sqlite_index
from kbmcp.store.sqlite.vectors import recorded_model
from kbmcp.workspace import Workspace
from tests.file_tree import write_tree

GUIDE = """\
---
title: The Field Guide
tags: [birds, Field Notes]
author: Ann Example
published: 2024-05-06
rating: .nan
---
# Introduction

Welcome to the guide. Café crème, naïve façade, 日本語のテキスト, emoji 🐦‍⬛ and e\u0301.

## Setup

```python
# this comment is not a heading
def watch(bird: str) -> None:
    print(f"saw {bird}")
```

## Species

### Corvids

Crows and ravens are clever. Ravens can imitate sounds; crows use tools.

### Waders

Herons wait in shallow water. The zzyzx heron is imaginary.
"""

SETEXT = "Some intro text.\n\nSetext Title\n============\n\nBody under the setext heading.\n"
MANUAL = "Manual Title\n============\n\nIntro paragraph.\n\nSection Two\n-----------\n\nMore.\n"
TOOL = 'def main() -> int:\n    """Entry point."""\n    return 0\n'
PAGE_HTML = """<!doctype html><html><head><title>Site | Field Page</title><style>p {}</style></head>
<body><nav><a href="/">Home</a> <a href="/x">Navigation link text</a></nav>
<main><h1>Field Page</h1><p>Egrets nest in colonies.</p>
<h2>Sightings</h2><p>A <b>rare</b> bittern was seen.</p></main>
<footer>Copyright footer text</footer><script>var tracking = 1;</script></body></html>
"""

# path -> (kind, title) of every document the mixed folder yields
EXPECTED_DOCUMENTS = {
    "guide.md": ("markdown", "The Field Guide"),
    "setext.md": ("markdown", "Setext Title"),
    "notes.txt": ("text", "notes.txt"),
    "manual.rst": ("rst", "Manual Title"),
    "page.html": ("html", "Field Page"),
    "sub/keep.txt": ("text", "keep.txt"),
    "sub/deep/page.md": ("markdown", "Deep Page"),
}
EXPECTED_SKIPS = {
    "binary": 1,
    "build output": 1,
    "gitignored": 3,
    "hidden": 4,
    "image": 2,
    "lock file": 1,
    "minified asset": 1,
    "not UTF-8": 1,
    "code or config (use --code)": 1,
}


def make_mixed_folder(root: Path) -> Path:
    """A folder with every kind of file `kbmcp add` meets; see EXPECTED_* for what it yields."""
    files: dict[str, str | bytes] = {
        "guide.md": GUIDE,
        "setext.md": SETEXT,
        "notes.txt": "Plain notes.\nSecond line about herons.\n",
        "manual.rst": MANUAL,
        "page.html": PAGE_HTML,
        "tool.py": TOOL,  # source code: only with --code
        "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),  # image
        "logo.svg": '<svg xmlns="http://www.w3.org/2000/svg"><text>logo</text></svg>',  # image
        "blob": b"no suffix, but binary \x00\x01\x02",  # binary (sniffed)
        "package-lock.json": '{"lockfileVersion": 3}',  # lock file
        "assets/app.min.js": "var a=1;",  # minified asset
        "node_modules/pkg/README.md": "# a dependency",  # build output (the folder counts once)
        "latin1.txt": "caf\xe9 cr\xe8me".encode("latin-1"),  # not UTF-8
        ".secret.md": "# hidden file",  # hidden
        ".cache/state.md": "# hidden folder",  # hidden (the folder counts once)
        ".gitignore": "*.log\nbuild/\n",  # hidden itself
        "app.log": "ignored by *.log",  # gitignored
        "build/out.md": "# ignored folder",  # gitignored (the folder counts once)
        "sub/.gitignore": "*.txt\n!keep.txt\n",  # hidden itself
        "sub/scratch.txt": "ignored by the nested .gitignore",  # gitignored
        "sub/keep.txt": "re-included by a negation\n",
        "sub/deep/page.md": "# Deep Page\n\nNested two folders down.\n",
    }
    return write_tree(root / "mixed", files)


class CountingEmbedder(DelegatingEmbedder):
    """Counts calls and texts; can fail on a given call."""

    def __init__(self, inner: Embedder | None = None, fail_on_call: int | None = None) -> None:
        super().__init__(inner or HashingEmbedder())
        self.fail_on_call = fail_on_call
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError(f"embedder failed on call {self.calls}")
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def ws(db_path: Path, embedder: CountingEmbedder) -> Iterator[Workspace]:
    workspace = Workspace(Settings(db=db_path, embedder="hash"), embedder=embedder)
    try:
        yield workspace
    finally:
        workspace.close()


def add(workspace: Workspace, *paths: Path, **options: object) -> IngestReport:
    return add_paths(workspace, workspace.local_principal(), list(paths), IngestOptions(**options))


def rows(conn: apsw.Connection, query: str, params: object = None) -> list[tuple]:
    return conn.execute(query, params).fetchall()


def ids(conn: apsw.Connection, query: str) -> set[int]:
    return {row[0] for row in conn.execute(query)}


CURRENT_CHUNKS = """
SELECT c.id FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
WHERE d.status = 'published'"""


def assert_indexes_consistent(conn: apsw.Connection) -> None:
    """Exactly the chunks of published documents' current revisions are searchable (FTS5 and
    vec0); every current chunk (archived documents too) has a stored vector; every document has
    a current revision whose chunks are complete and exact."""
    published = ids(conn, CURRENT_CHUNKS)
    current = ids(
        conn, "SELECT c.id FROM document d JOIN chunk c ON c.revision_id = d.current_revision_id"
    )
    assert ids(conn, "SELECT rowid FROM chunk_fts") == published
    assert ids(conn, "SELECT rowid FROM chunk_vec") == published
    assert ids(conn, "SELECT chunk_id FROM chunk_vector") == current
    assert rows(conn, "SELECT id FROM document WHERE current_revision_id IS NULL") == []
    assert_chunks_exact(conn)


def line_at(content: str, index: int) -> int:
    """1-based line of content[index]; a line break is \\r\\n, \\r or \\n."""
    return len(re.findall(r"\r\n|\r|\n", content[:index])) + 1


def assert_chunks_exact(conn: apsw.Connection) -> None:
    """For every chunk of every revision: the text is the revision's slice, the line numbers
    are those of its first and last characters, ordinals are 0..n-1."""
    checked = 0
    for revision_id, content in rows(conn, "SELECT id, content FROM revision"):
        chunks = rows(
            conn,
            "SELECT ordinal, char_start, char_end, line_start, line_end, text FROM chunk "
            "WHERE revision_id = ? ORDER BY ordinal",
            (revision_id,),
        )
        assert [chunk[0] for chunk in chunks] == list(range(len(chunks)))
        for _ordinal, start, end, line_start, line_end, text in chunks:
            assert content[start:end] == text
            assert text and text == text.strip()
            assert line_start == line_at(content, start)
            assert line_end == line_at(content, end - 1)
            checked += 1
    assert checked > 0


def fts_hits(conn: apsw.Connection, word: str) -> set[int]:
    return ids(conn, f"SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH '\"{word}\"'")


def document_row(conn: apsw.Connection, path: str) -> tuple:
    return conn.execute(
        "SELECT public_id, status, current_revision_id, title, source FROM document WHERE path = ?",
        (path,),
    ).fetchone()


# --------------------------------------------------------------------------- a mixed folder


def test_mixed_folder_counts_in_report_and_database(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    folder = make_mixed_folder(tmp_path)
    progress: list[tuple[int, int]] = []
    report = add_paths(ws, ws.local_principal(), [folder], progress=lambda *p: progress.append(p))
    assert report.errors == []
    assert (report.added, report.updated, report.unchanged, report.archived) == (7, 0, 0, 0)
    # files read: the 7 documents, the sniffed binary and the non-UTF-8 one
    assert progress[-1] == (9, 9)
    # the single-user defaults, created on first use
    assert rows(ws.conn, "SELECT name FROM tenant") == [("local",)]
    assert rows(ws.conn, "SELECT name FROM knowledge_base") == [("default",)]
    assert report.knowledge_base == "default"
    assert dict(report.skipped) == EXPECTED_SKIPS
    conn = ws.conn
    documents = {
        path: (kind, title)
        for path, kind, title in rows(conn, "SELECT path, kind, title FROM document")
    }
    assert documents == EXPECTED_DOCUMENTS
    assert rows(conn, "SELECT DISTINCT status FROM document") == [("published",)]
    assert rows(conn, "SELECT count(*) FROM revision") == [(7,)]
    chunk_count = rows(conn, "SELECT count(*) FROM chunk")[0][0]
    assert report.chunks_indexed == report.chunks_embedded == chunk_count == len(embedder.texts)
    assert_indexes_consistent(conn)
    sources = {row[0] for row in rows(conn, "SELECT source FROM document")}
    assert sources == {str(folder.resolve() / path) for path in EXPECTED_DOCUMENTS}
    line = report.summary_line()
    assert "added 7, updated 0, unchanged 0, archived 0, skipped 15 (binary 1, build" in line
    assert f"{chunk_count} chunks indexed" in line


def test_front_matter_and_options_fill_title_tags_and_metadata(
    ws: Workspace, tmp_path: Path
) -> None:
    folder = make_mixed_folder(tmp_path)
    add(ws, folder, tags=[("team", "birds")], metadata=[("source", "field"), ("author", "Bo")])
    page = list_documents(ws, ws.local_principal(), limit=50)
    by_path = {doc.path: doc for doc in page.documents}
    guide = by_path["guide.md"]
    assert guide.title == "The Field Guide"
    assert guide.tags == {"tag": ["Field Notes", "birds"], "team": "birds"}
    # --meta wins over front matter; dates become ISO text and NaN a string (valid JSON)
    assert guide.metadata == {
        "author": "Bo",
        "published": "2024-05-06",
        "rating": "nan",
        "source": "field",
    }
    assert by_path["notes.txt"].tags == {"team": "birds"}
    assert by_path["notes.txt"].metadata == {"author": "Bo", "source": "field"}


def test_invalid_front_matter_is_a_warning_and_the_heading_is_the_title(
    ws: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "bad.md").write_text("---\ntitle: [unclosed\n---\n# Real Title\n\ntext\n")
    report = add(ws, tmp_path / "bad.md")
    assert report.added == 1
    assert len(report.warnings) == 1 and "front matter ignored" in report.warnings[0]
    assert document_row(ws.conn, "bad.md")[3] == "Real Title"


def test_front_matter_with_yaml_aliases_is_ignored_not_expanded(
    ws: Workspace, tmp_path: Path
) -> None:
    # Nine levels of nine aliases: a billion leaves once expanded into stored JSON.
    levels = ['a0: &a0 ["lol"]'] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)
    ]
    bomb = "---\n" + "\n".join(levels) + "\n---\n# Laughs\n\ntext\n"
    (tmp_path / "bomb.md").write_text(bomb)
    report = add(ws, tmp_path / "bomb.md")
    assert report.added == 1
    assert len(report.warnings) == 1 and "aliases" in report.warnings[0]
    assert document_row(ws.conn, "bomb.md")[3] == "Laughs"


# --------------------------------------------------------------------------- re-adding


def test_readd_is_idempotent_and_embeds_nothing(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    folder = make_mixed_folder(tmp_path)
    add(ws, folder)
    before = rows(ws.conn, "SELECT public_id, current_revision_id, updated_at FROM document")
    calls = embedder.calls
    report = add(ws, folder)
    assert (report.added, report.updated, report.unchanged) == (0, 0, 7)
    assert report.chunks_indexed == report.chunks_embedded == 0
    assert embedder.calls == calls
    assert rows(ws.conn, "SELECT public_id, current_revision_id, updated_at FROM document") == (
        before
    )
    assert rows(ws.conn, "SELECT count(*) FROM revision") == [(7,)]


def test_edit_creates_a_revision_and_reembeds_only_changed_chunks(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    folder = make_mixed_folder(tmp_path)
    small = ChunkingOptions(max_chars=120, overlap_chars=20)
    add(ws, folder, chunking=small)
    guide_id, _, old_revision, _, _ = document_row(ws.conn, "guide.md")
    old = read_document(ws, ws.local_principal(), guide_id)
    old_chunks = ids(ws.conn, f"SELECT id FROM chunk WHERE revision_id = {old_revision}")
    assert len(old_chunks) >= 4
    assert fts_hits(ws.conn, "zzyzx")

    edited = GUIDE.replace("The zzyzx heron is imaginary.", "The qwerty egret is real.")
    (folder / "guide.md").write_text(edited, encoding="utf-8")
    embedder.texts.clear()
    report = add(ws, folder, chunking=small)

    assert (report.added, report.updated, report.unchanged) == (0, 1, 6)
    assert report.chunks_embedded == len(embedder.texts) == 1  # only the edited chunk
    assert "qwerty egret" in embedder.texts[0]
    new_id, _, new_revision, _, _ = document_row(ws.conn, "guide.md")
    assert new_id == guide_id and new_revision != old_revision
    assert_indexes_consistent(ws.conn)
    assert fts_hits(ws.conn, "zzyzx") == set()
    assert fts_hits(ws.conn, "qwerty")
    assert not old_chunks & ids(ws.conn, "SELECT rowid FROM chunk_vec")

    current = read_document(ws, ws.local_principal(), guide_id)
    assert current.revision_number == 2 and current.is_current_revision
    assert current.content == edited
    previous = read_document(ws, ws.local_principal(), guide_id, revision_id=old.revision_id)
    assert previous.revision_number == 1 and not previous.is_current_revision
    assert previous.content == GUIDE


def test_changed_options_update_in_place_without_a_new_revision(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    folder = make_mixed_folder(tmp_path)
    add(ws, folder)
    revisions = rows(ws.conn, "SELECT path, current_revision_id FROM document ORDER BY path")
    calls = embedder.calls
    report = add(ws, folder, tags=[("team", "birds")])
    assert (report.updated, report.chunks_embedded, report.chunks_indexed) == (7, 0, 0)
    assert embedder.calls == calls
    assert rows(ws.conn, "SELECT path, current_revision_id FROM document ORDER BY path") == (
        revisions
    )
    assert rows(ws.conn, "SELECT count(*) FROM revision") == [(7,)]
    tagged = list_documents(ws, ws.local_principal(), tags={"team": "birds"})
    assert len(tagged.documents) == 7
    assert_indexes_consistent(ws.conn)


def test_a_moved_folder_updates_sources_without_new_revisions(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    folder = make_mixed_folder(tmp_path)
    add(ws, folder)
    moved = folder.rename(tmp_path / "moved")
    calls = embedder.calls
    report = add(ws, moved)
    assert (report.added, report.updated, report.chunks_embedded) == (0, 7, 0)
    assert embedder.calls == calls
    assert rows(ws.conn, "SELECT count(*) FROM revision") == [(7,)]
    assert document_row(ws.conn, "notes.txt")[4] == str(moved.resolve() / "notes.txt")


def test_a_new_title_for_the_same_content_reindexes_in_place(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Titles only change with the content, unless title rules change (a kbmcp upgrade): the
    revision is kept, and the keyword index and the vectors (whose input has the title) follow."""
    folder = make_mixed_folder(tmp_path)
    add(ws, folder)
    _, _, revision, _, _ = document_row(ws.conn, "notes.txt")
    chunks = ids(ws.conn, f"SELECT id FROM chunk WHERE revision_id = {revision}")
    real_parse = ingest_module.parse_document

    def retitled(text: str, relative_path: str, *args: object) -> ParsedDocument:
        parsed = real_parse(text, relative_path, *args)
        if relative_path != "notes.txt":
            return parsed
        return dataclasses.replace(parsed, title="Quokka Observations")

    monkeypatch.setattr(ingest_module, "parse_document", retitled)
    # new title rules come with a new parsing version: unchanged files are read again
    monkeypatch.setattr("kbmcp.ingest.parsing.PARSING_VERSION", 99)
    embedder.texts.clear()
    report = add(ws, folder)
    assert (report.updated, report.unchanged) == (1, 6)
    assert report.chunks_indexed == report.chunks_embedded == len(chunks)
    assert all(text.startswith("Quokka Observations") for text in embedder.texts)
    assert document_row(ws.conn, "notes.txt")[2:4] == (revision, "Quokka Observations")
    assert fts_hits(ws.conn, "quokka") == chunks
    assert_indexes_consistent(ws.conn)


def test_the_same_path_twice_in_one_run_is_skipped_with_a_warning(
    ws: Workspace, tmp_path: Path
) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "readme.md").write_text(f"# From {name}\n")
    report = add(ws, tmp_path / "a", tmp_path / "b")
    assert report.added == 1 and report.skipped == {"duplicate path": 1}
    assert "already added in this run" in report.warnings[0]
    assert document_row(ws.conn, "readme.md")[3] == "From a"


def test_a_missing_path_is_an_error_before_anything_is_written(
    ws: Workspace, tmp_path: Path
) -> None:
    folder = make_mixed_folder(tmp_path)
    with pytest.raises(InvalidRequest, match=r"no such file or folder: .*nope"):
        add(ws, folder, tmp_path / "nope", knowledge_base="new-kb")
    assert rows(ws.conn, "SELECT count(*) FROM knowledge_base") == [(0,)]
    assert rows(ws.conn, "SELECT count(*) FROM document") == [(0,)]


# --------------------------------------------------------------------------- prune


def test_prune_archives_a_deleted_file_and_readding_restores_it(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    folder = make_mixed_folder(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "elsewhere.md").write_text("# Elsewhere\n\nOutside the pruned folder.\n")
    add(ws, folder, other)
    doc_id, _, revision, _, _ = document_row(ws.conn, "guide.md")
    guide_chunks = ids(ws.conn, f"SELECT id FROM chunk WHERE revision_id = {revision}")
    (folder / "guide.md").unlink()

    report = add(ws, folder, prune=True)
    assert (report.archived, report.unchanged) == (1, 6)
    assert document_row(ws.conn, "guide.md")[1] == "archived"
    assert document_row(ws.conn, "elsewhere.md")[1] == "published"  # not under the added folder
    assert_indexes_consistent(ws.conn)
    searchable = ids(ws.conn, "SELECT rowid FROM chunk_fts") | ids(
        ws.conn, "SELECT rowid FROM chunk_vec"
    )
    assert not guide_chunks & searchable
    assert fts_hits(ws.conn, "zzyzx") == set()
    assert read_document(ws, ws.local_principal(), doc_id).content == GUIDE  # still readable
    listed = list_documents(ws, ws.local_principal())
    assert "guide.md" not in {doc.path for doc in listed.documents}
    with_archived = list_documents(ws, ws.local_principal(), include_archived=True)
    assert "guide.md" in {doc.path for doc in with_archived.documents}

    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    calls = embedder.calls
    report = add(ws, folder, prune=True)
    assert (report.updated, report.archived, report.chunks_embedded) == (1, 0, 0)
    assert report.chunks_indexed == len(guide_chunks)
    assert embedder.calls == calls
    assert document_row(ws.conn, "guide.md")[1:3] == ("published", revision)  # same revision
    assert guide_chunks <= ids(ws.conn, "SELECT rowid FROM chunk_vec")
    assert fts_hits(ws.conn, "zzyzx")
    assert_indexes_consistent(ws.conn)


def test_prune_archives_a_file_that_became_ignored(ws: Workspace, tmp_path: Path) -> None:
    folder = make_mixed_folder(tmp_path)
    add(ws, folder)
    (folder / ".gitignore").write_text("*.log\nbuild/\nnotes.txt\n")
    report = add(ws, folder, prune=True)
    assert report.archived == 1
    assert document_row(ws.conn, "notes.txt")[1] == "archived"


def test_prune_is_skipped_when_a_folder_could_not_be_read(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_mixed_folder(tmp_path)
    add(ws, folder)
    (folder / "notes.txt").unlink()
    real_walk = ingest_module.iter_source_files

    def walk_with_an_unreadable_folder(
        paths: list[Path], report: WalkReport, *args: object
    ) -> Iterator:
        report.errors.append(f"{folder / 'locked'}: cannot read folder (Permission denied)")
        yield from real_walk(paths, report, *args)

    monkeypatch.setattr(ingest_module, "iter_source_files", walk_with_an_unreadable_folder)
    report = add(ws, folder, prune=True)
    assert report.archived == 0
    assert any("--prune skipped" in warning for warning in report.warnings)
    assert document_row(ws.conn, "notes.txt")[1] == "published"


# --------------------------------------------------------------------------- chunks


def test_chunk_offsets_are_exact_on_markdown_with_headings_code_and_unicode(
    ws: Workspace, tmp_path: Path
) -> None:
    crlf = GUIDE.replace("\n", "\r\n")
    (tmp_path / "crlf.md").write_text(crlf, encoding="utf-8", newline="")
    (tmp_path / "bom.md").write_bytes("\ufeff# BOM Title\n\ntext 😀\n".encode())
    (tmp_path / "mac.txt").write_bytes(b"line one\rline two\r\rline four\r")  # CR-only breaks
    folder = make_mixed_folder(tmp_path)
    extra = [tmp_path / "crlf.md", tmp_path / "bom.md", tmp_path / "mac.txt"]
    for options in (ChunkingOptions(), ChunkingOptions(max_chars=60, overlap_chars=15)):
        add(ws, folder, *extra, chunking=options)
    assert_chunks_exact(ws.conn)
    assert document_row(ws.conn, "bom.md")[3] == "BOM Title"  # the BOM is not content
    # line numbers agree between the revision, its chunks (citations) and read windows
    mac_id = document_row(ws.conn, "mac.txt")[0]
    assert rows(
        ws.conn,
        "SELECT r.line_count, max(c.line_end) FROM revision r JOIN chunk c "
        "ON c.revision_id = r.id WHERE r.id = (SELECT current_revision_id FROM document "
        "WHERE path = 'mac.txt')",
    ) == [(4, 4)]
    window = read_document(ws, ws.local_principal(), mac_id, offset=9, limit_chars=8)
    assert (window.content, window.line_start, window.line_end) == ("line two", 2, 2)
    headings = {
        tuple(json.loads(h))
        for (h,) in rows(
            ws.conn,
            "SELECT c.heading_path FROM chunk c JOIN document d "
            "ON c.revision_id = d.current_revision_id WHERE d.path = 'guide.md'",
        )
    }
    # the `# comment` inside the code fence is not a heading; the front matter is no chunk (its
    # fields are the title, tags and metadata)
    assert headings == {
        ("Introduction",),
        ("Introduction", "Setup"),
        ("Introduction", "Species"),
        ("Introduction", "Species", "Corvids"),
        ("Introduction", "Species", "Waders"),
    }


def test_a_very_long_document_is_indexed_whole(ws: Workspace, tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {i} about topic{i} and more words here." for i in range(3000)]
    paragraphs.append("The very last paragraph mentions omegaword.")
    long_text = "# Long\n\n" + "\n\n".join(paragraphs) + "\n"
    one_line = "x" * 100_000 + " finalword"  # no line breaks at all
    (tmp_path / "long.md").write_text(long_text)
    (tmp_path / "line.txt").write_text(one_line)
    report = add(ws, tmp_path / "long.md", tmp_path / "line.txt")
    assert report.added == 2
    for path, content in (("long.md", long_text), ("line.txt", one_line)):
        revision = document_row(ws.conn, path)[2]
        covered = bytearray(len(content))
        for start, end in rows(
            ws.conn, "SELECT char_start, char_end FROM chunk WHERE revision_id = ?", (revision,)
        ):
            covered[start:end] = b"\x01" * (end - start)
        uncovered = [i for i, ch in enumerate(content) if not covered[i] and not ch.isspace()]
        assert uncovered == []
    assert fts_hits(ws.conn, "omegaword") and fts_hits(ws.conn, "finalword")
    assert_indexes_consistent(ws.conn)


# --------------------------------------------------------------------------- interruptions


def many_files(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"note{i:02d}.md").write_text(
            f"# Note {i}\n\nFirst paragraph of note {i}.\n\n## More\n\nSecond part of {i}.\n"
        )
    return folder


def assert_all_or_nothing(conn: apsw.Connection) -> set[str]:
    """Every document present is fully indexed; returns the paths present."""
    assert_indexes_consistent(conn)
    for path, revision in rows(conn, "SELECT path, current_revision_id FROM document"):
        chunks = ids(conn, f"SELECT id FROM chunk WHERE revision_id = {revision}")
        assert chunks, path
        assert chunks <= ids(conn, "SELECT rowid FROM chunk_fts")
    return {row[0] for row in rows(conn, "SELECT path FROM document")}


def test_an_embedder_failure_midway_leaves_no_half_written_document(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_batch, "EMBED_BATCH_CHUNKS", 6)  # ~2 documents per batch
    folder = many_files(tmp_path / "notes", 12)
    failing = CountingEmbedder(fail_on_call=2)
    with Workspace(Settings(db=db_path), embedder=failing) as workspace:
        with pytest.raises(RuntimeError, match="failed on call 2"):
            add(workspace, folder)
        present = assert_all_or_nothing(workspace.conn)
        assert 0 < len(present) < 12
    with Workspace(Settings(db=db_path), embedder=CountingEmbedder()) as workspace:
        report = add(workspace, folder)
        assert report.unchanged == len(present) and report.added == 12 - len(present)
        assert len(assert_all_or_nothing(workspace.conn)) == 12


def test_a_write_failure_midway_rolls_back_whole_documents(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_batch, "EMBED_BATCH_CHUNKS", 6)
    folder = many_files(tmp_path / "notes", 12)
    real_add_to_index = sqlite_index.add_to_index
    calls = 0

    def flaky_add_to_index(*args: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:  # inside the second batch, after its first document was written
            raise apsw.IOError("disk went away")
        real_add_to_index(*args)

    monkeypatch.setattr(sqlite_index, "add_to_index", flaky_add_to_index)
    with pytest.raises(apsw.IOError):
        add(ws, folder)
    present = assert_all_or_nothing(ws.conn)
    assert 0 < len(present) < 12
    assert not ws.conn.in_transaction
    monkeypatch.setattr(sqlite_index, "add_to_index", real_add_to_index)
    report = add(ws, folder)
    assert report.added == 12 - len(present)
    assert len(assert_all_or_nothing(ws.conn)) == 12


def test_a_concurrent_identical_add_creates_no_duplicate_revisions(
    db_path: Path, tmp_path: Path
) -> None:
    """Another process adds the same folder while this run is embedding: what it wrote is
    recognised under the write lock instead of being written again as revision 2."""
    folder = make_mixed_folder(tmp_path)
    other = Workspace(Settings(db=db_path), embedder=HashingEmbedder())

    class RacingEmbedder(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            if self.calls == 0:
                assert add(other, folder).added == 7
            return super().embed(texts)

    with other, Workspace(Settings(db=db_path), embedder=RacingEmbedder()) as workspace:
        report = add(workspace, folder)
        assert (report.added, report.updated, report.unchanged) == (0, 0, 7)
        assert rows(workspace.conn, "SELECT count(*), max(number) FROM revision") == [(7, 1)]
        assert_indexes_consistent(workspace.conn)


# --------------------------------------------------------------------------- the model


def test_another_model_is_refused_until_reembed(db_path: Path, tmp_path: Path) -> None:
    folder = make_mixed_folder(tmp_path)
    with Workspace(Settings(db=db_path), embedder=HashingEmbedder()) as workspace:
        add(workspace, folder)
        (folder / "notes.txt").unlink()
        add(workspace, folder, prune=True)  # an archived document keeps its stored vectors
    other = HashingEmbedder(dimension=64)
    with Workspace(Settings(db=db_path), embedder=other) as workspace:
        with pytest.raises(ModelMismatch, match=r"kbmcp reembed") as caught:
            add(workspace, folder)
        assert "hashing (dim 384" in caught.value.message
        assert caught.value.details["configured"]["dimension"] == 64

        result = reembed(workspace, workspace.local_principal())
        conn = workspace.conn
        assert recorded_model(conn) == other.fingerprint
        assert result["previous_model"]["dimension"] == 384
        current = rows(
            conn,
            "SELECT count(*) FROM document d JOIN chunk c ON c.revision_id = d.current_revision_id",
        )[0][0]
        assert result["chunks"] == current
        assert rows(conn, "SELECT count(*) FROM chunk_vector") == [(current,)]
        assert {len(blob) for (blob,) in rows(conn, "SELECT embedding FROM chunk_vector")} == {
            64 * 4
        }
        assert_indexes_consistent(conn)
        query = other.embed(["herons wait in shallow water"])[0].tobytes()
        hits = rows(conn, "SELECT rowid FROM chunk_vec WHERE embedding MATCH ? AND k = 3", (query,))
        assert len(hits) == 3
        report = add(workspace, folder)  # the configured model now matches
        assert report.unchanged == 6


def test_the_default_model_ingests_and_reads_back(db_path: Path, tmp_path: Path) -> None:
    from kbmcp.embed.minilm import FINGERPRINT, MiniLMEmbedder

    (tmp_path / "a.md").write_text("# Keys\n\nRotate API keys every ninety days.\n")
    (tmp_path / "b.md").write_text("# Birds\n\nHerons wait in shallow water for fish.\n")
    model = MiniLMEmbedder()
    with Workspace(Settings(db=db_path), embedder=model) as workspace:
        report = add(workspace, tmp_path / "a.md", tmp_path / "b.md")
        assert report.added == 2 and report.chunks_embedded == 2
        assert recorded_model(workspace.conn) == FINGERPRINT
        doc_id = document_row(workspace.conn, "a.md")[0]
        window = read_document(workspace, workspace.local_principal(), doc_id)
        assert window.content.startswith("# Keys")
        query = model.embed(["how often should credentials be changed"])[0].tobytes()
        (best,) = rows(
            workspace.conn,
            "SELECT c.text FROM chunk_vec v JOIN chunk c ON c.id = v.rowid "
            "WHERE v.embedding MATCH ? AND k = 1",
            (query,),
        )
        assert "Rotate API keys" in best[0]


def test_an_empty_knowledge_base_filter_selects_nothing_rather_than_everything(
    ws: Workspace, tmp_path: Path
) -> None:
    add(ws, make_mixed_folder(tmp_path))
    with pytest.raises(InvalidRequest, match="knowledge_base_ids must not be empty"):
        list_documents(ws, ws.local_principal(), knowledge_base_ids=[])
    with pytest.raises(InvalidRequest, match="not a valid knowledge base id"):
        list_documents(ws, ws.local_principal(), knowledge_base_ids=["default"])


def test_progress_moves_per_file_while_a_batch_embeds(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of one write batch are counted as their vectors are computed (in slices), not all at
    once when the batch is written, and never before: the bar moves while the model works and
    does not sit at 100% while the last batch embeds."""
    monkeypatch.setattr(ingest_batch, "EMBED_SLICE", 2)
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(5):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nSome text about topic {i}.\n")
    calls: list[tuple[int, int, int]] = []  # (done, total, texts embedded so far)
    texts_embedded = embedder
    with_progress = add_paths(
        ws,
        ws.local_principal(),
        [folder],
        IngestOptions(),
        lambda d, t: calls.append((d, t, len(texts_embedded.texts))),
    )
    assert with_progress.added == 5
    done = [d for d, _, _ in calls]
    assert done == sorted(done), "progress never goes backwards"
    assert calls[-1][:2] == (5, 5)
    # one chunk per file, two per embedding call: the count follows the embedded texts
    moving = [(d, embedded) for d, _, embedded in calls if 0 < d < 5]
    assert moving and all(d <= embedded for d, embedded in moving)
    assert {d for d, _ in moving} >= {2, 4}
    assert all(d == 0 for d, _, embedded in calls if embedded == 0)


def test_other_chunking_rechunks_unchanged_files_in_a_new_revision(
    ws: Workspace, tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files whose content did not change still follow new chunk sizes or chunking rules (an
    upgrade: front matter used to be a chunk): a new revision when the chunks differ, in place
    when they do not; old revisions keep their chunks, so old citations still resolve."""
    folder = make_mixed_folder(tmp_path)
    add(ws, folder, chunking=ChunkingOptions(max_chars=80, overlap_chars=10))
    guide_id, _, old_revision, _, _ = document_row(ws.conn, "guide.md")
    old_chunks = rows(ws.conn, f"SELECT id, text FROM chunk WHERE revision_id = {old_revision}")
    embedder.texts.clear()
    report = add(ws, folder)  # default sizes
    assert report.updated == 7 and report.added == 0
    _, _, new_revision, _, _ = document_row(ws.conn, "guide.md")
    assert new_revision != old_revision
    assert rows(ws.conn, f"SELECT id, text FROM chunk WHERE revision_id = {old_revision}") == (
        old_chunks
    )
    new_chunks = rows(ws.conn, f"SELECT text FROM chunk WHERE revision_id = {new_revision}")
    assert len(new_chunks) < len(old_chunks)
    assert_indexes_consistent(ws.conn)
    assert read_document(ws, ws.local_principal(), guide_id).content == GUIDE
    assert add(ws, folder).unchanged == 7  # and then nothing more to do

    # a new chunker version whose chunks are the same: updated in place, nothing embedded
    monkeypatch.setattr("kbmcp.ingest.chunker.CHUNKER_VERSION", 99)
    embedder.texts.clear()
    report = add(ws, folder)
    assert (report.updated, report.chunks_embedded) == (7, 0)
    assert document_row(ws.conn, "guide.md")[2] == new_revision
    assert embedder.texts == []
