"""Real folders read as a person reads them: a short text PDF is a document (only a scan is
called scanned), TeX's unmapped math symbols leave no control characters, a Sphinx page's
footnotes are cited under "Footnotes", a Sphinx table of contents is not a document, an empty
Markdown file is not a document, and a PDF being read is named in the progress, page by page."""

from __future__ import annotations

from pathlib import Path

from kbmcp.cli.progress import Frame, progress_lines
from kbmcp.ingest.pdf import pdf_to_text
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import add_paths
from kbmcp.service.ingest_progress import IngestProgress
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.mcp_support import write
from tests.pdf_fixture import write_pdf


def paths_found(workspace: Workspace, query: str) -> list[tuple[str, list[str]]]:
    request = SearchRequest(query, mode="lexical")
    results = search(workspace, workspace.local_principal(), request).results
    return [(result.path, result.heading_path) for result in results]


def test_a_short_text_pdf_is_a_document_and_only_a_scan_is_called_scanned(
    tmp_path: Path, workspace: Workspace
) -> None:
    folder = tmp_path / "pdfs"
    folder.mkdir()
    write_pdf(folder / "hello.pdf", [["Hello, World!"]])  # 10 letters, no image
    write_pdf(folder / "form.pdf", [["Name:", "Date:"], ["Signature:"]])  # a form's labels
    write_pdf(folder / "blank.pdf", [[], []])  # neither text nor image
    write_pdf(folder / "scan.pdf", [["Background"]] * 2, scanned=frozenset({0, 1}))
    body = "A page of real text about grey herons wading in the reeds."
    write_pdf(folder / "numbered.pdf", [[body], ["2"]])  # a page number alone: left out
    report = add_paths(workspace, workspace.local_principal(), [folder])
    assert report.skipped == {"PDF without text": 1, "PDF without text (scanned?)": 1}
    assert report.added == 3
    assert paths_found(workspace, "hello world") == [("hello.pdf", ["page 1"])]
    assert [path for path, _ in paths_found(workspace, "signature")] == ["form.pdf"]
    assert pdf_to_text(folder / "numbered.pdf").content == f"\f[page 1]\n\n{body}\n"


def test_tex_math_symbols_leave_no_control_characters(tmp_path: Path) -> None:
    """TeX's math fonts without a Unicode map: pypdf returns the glyph codes (here 0x12, which
    cmsy draws as ⊆) as control characters. They are dropped, the formula's letters stay."""
    path = write_pdf(tmp_path / "paper.pdf", [["Lemma 2. T \x12P(X) for every set X and T."]])
    content = pdf_to_text(path).content
    assert content is not None and "T P(X) for every set X" in content
    assert not any(ord(ch) < 32 and ch not in "\n\f" for ch in content), repr(content)


SPHINX_PAGE = """<!doctype html><html><head><title>Data model</title></head><body>
<div class="sphinxsidebar">navigation</div>
<div class="body" role="main"><section id="data-model"><h1>Data model</h1>
<p>Objects are Python's abstraction for data.<a class="footnote-reference" href="#id2">1</a></p>
<section id="special-names"><h2>Special method names</h2>
<p>A class can implement certain operations by defining methods with special names.</p>
<p class="rubric">Footnotes</p>
<aside class="footnote-list brackets"><aside class="footnote brackets" id="id2">
<span class="label">1</span><p>It is possible in some cases to change an object's type.</p>
</aside></aside></section></section></div></body></html>"""

CONTENTS_PAGE = """<!doctype html><html><body><div class="body" role="main">
<section id="python-documentation-contents"><h1>Python Documentation contents</h1>
<div class="toctree-wrapper compound"><ul>
<li><a href="whatsnew/index.html">What's New in Python</a><ul>
<li><a href="whatsnew/3.11.html">What's New In Python 3.11</a></li></ul></li>
<li><a href="library/index.html">The Python Standard Library</a></li></ul></div>
</section></div></body></html>"""

SECTION_INDEX = """<!doctype html><html><body><div class="body" role="main">
<section><h1>The Python Standard Library</h1>
<p>This library reference manual describes the standard library distributed with Python.</p>
<div class="toctree-wrapper compound"><ul><li><a href="intro.html">Introduction</a></li>
<li><a href="functions.html">Built-in Functions</a></li></ul></div></section></div></body></html>"""


def test_sphinx_footnotes_and_tables_of_contents(tmp_path: Path, workspace: Workspace) -> None:
    folder = write(
        tmp_path / "html",
        {
            "reference/datamodel.html": SPHINX_PAGE,
            "contents.html": CONTENTS_PAGE,
            "library/index.html": SECTION_INDEX,
        },
    )
    report = add_paths(workspace, workspace.local_principal(), [folder])
    assert report.skipped == {"table of contents page": 1}  # contents.html
    assert paths_found(workspace, "change an object's type") == [
        ("reference/datamodel.html", ["Data model", "Special method names", "Footnotes"])
    ]
    # The section index keeps its own text; its table of contents is navigation, not text.
    assert paths_found(workspace, "library reference manual") == [
        ("library/index.html", ["The Python Standard Library"])
    ]
    assert paths_found(workspace, "built-in functions") == []


def test_an_empty_markdown_file_is_not_a_document(tmp_path: Path, workspace: Workspace) -> None:
    folder = write(tmp_path / "notes", {"empty.md": "", "blank.md": " \n\n", "a.md": "# A\n"})
    report = add_paths(workspace, workspace.local_principal(), [folder])
    assert report.added == 1 and report.skipped == {"no text": 2}
    paths = [row[0] for row in workspace.conn.execute("SELECT path FROM document")]
    assert paths == ["a.md"]


def test_a_pdf_being_read_is_named_with_its_page(tmp_path: Path, workspace: Workspace) -> None:
    folder = tmp_path / "pdfs"
    folder.mkdir()
    pages = [[f"Page {n} of the heron survey, with enough words to be a page."] for n in range(6)]
    write_pdf(folder / "survey.pdf", pages)
    events: list[IngestProgress] = []
    add_paths(workspace, workspace.local_principal(), [folder], on_progress=events.append)
    reading = [e for e in events if e.current_action == "reading"]
    assert {e.current_file for e in reading} == {str(folder / "survey.pdf")}
    assert [e.current_pages_done for e in reading][-6:] == [0, 1, 2, 3, 4, 5]
    assert all(e.current_pages_total == 6 for e in reading[-6:])
    assert reading[0].bytes_total > 0  # the bar has its total while the first file is read
    frame = Frame(
        label="indexing",
        done=0,
        total=reading[-1].bytes_total,
        unit="bytes",
        elapsed=40.0,
        remaining=None,
        files=(0, 1),
        current_file=str(folder / "survey.pdf"),
        current_for=27.0,
        current_action="reading",
        current_pages=(reading[-1].current_pages_done, 6),
    )
    _, second = (text for text, _ in progress_lines(frame, 200))
    assert second == f"  reading {folder / 'survey.pdf'}: page 6 of 6, for 0:00:27"
