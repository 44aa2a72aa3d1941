"""Issue 12's corpus: Markdown + SVG + PNG + a two-page PDF + an HTML page + a .gitignore.

`add` indexes exactly the document files, PDF hits cite their page (heading path, outline),
HTML keeps its headings and drops navigation, and the summary counts skipped files by reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbmcp.ingest.chunker import outline
from kbmcp.ingest.html import decode_html, html_to_text
from kbmcp.ingest.pdf import pdf_to_text
from kbmcp.ingest.walker import Selection
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.ingest_preview import preview_paths
from kbmcp.service.read import document_outline, fetch_chunks, read_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.pdf_fixture import write_pdf

HTML_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Herons | Bird Site</title>
<script>window.analytics = "tracking snippet";</script></head>
<body>
<header><a href="/">Bird Site</a></header>
<nav><ul><li><a href="/a">Sidebar link about owls</a></li></ul></nav>
<main>
  <h1>Grey herons</h1>
  <p>Grey herons stand still in shallow water.</p>
  <h2>Nesting</h2>
  <p>They nest in <em>heronries</em>, high in the trees.</p>
  <pre><code># not a heading
heron.wait()</code></pre>
</main>
<footer>Copyright footer</footer>
</body></html>
"""


def build_corpus(root: Path) -> Path:
    folder = root / "corpus"
    (folder / "img").mkdir(parents=True)
    (folder / "guide.md").write_text("# Guide\n\nHow to watch wading birds.\n")
    (folder / "img" / "diagram.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg"><text>heron diagram label</text></svg>'
    )
    (folder / "img" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    write_pdf(
        folder / "report.pdf",
        [["Annual bird report", "Counting started in spring."], ["Page two: 41 bitterns seen."]],
        title="Bird Report 2026",
    )
    # pages that draw an image and hold no text: a scan without OCR
    write_pdf(folder / "scan.pdf", [[], []], scanned=frozenset({0, 1}))
    (folder / "herons.html").write_text(HTML_PAGE)
    (folder / ".gitignore").write_text("drafts/\n")
    (folder / "drafts").mkdir()
    (folder / "drafts" / "wip.md").write_text("# Draft\n")
    return folder


def test_the_mixed_corpus_indexes_exactly_the_documents(
    workspace: Workspace, tmp_path: Path
) -> None:
    folder = build_corpus(tmp_path)
    report = add_paths(workspace, workspace.local_principal(), [folder])
    assert report.errors == []
    documents = dict(
        workspace.conn.execute("SELECT path, kind FROM document ORDER BY path").fetchall()
    )
    assert documents == {"guide.md": "markdown", "herons.html": "html", "report.pdf": "pdf"}
    assert dict(report.skipped) == {
        "PDF without text (scanned?)": 1,
        "gitignored": 1,  # drafts/
        "hidden": 1,  # .gitignore itself
        "image": 2,  # the SVG and the PNG
    }
    assert report.summary_line().startswith(
        "default: added 3, updated 0, unchanged 0, archived 0, skipped 5 "
        "(PDF without text (scanned?) 1, gitignored 1, hidden 1, image 2);"
    )
    # the dry run lists the same, file by file
    preview = preview_paths([folder])
    assert [(f.path, f.kind) for f in preview.files] == [
        ("guide.md", "markdown"),
        ("herons.html", "html"),
        ("report.pdf", "pdf"),
    ]
    assert preview.counts() == dict(report.skipped)
    assert ("img/diagram.svg", "image") in preview.skipped
    assert ("drafts/", "gitignored") in preview.skipped


def test_pdf_hits_cite_their_page(workspace: Workspace, tmp_path: Path) -> None:
    folder = build_corpus(tmp_path)
    principal = workspace.local_principal()
    add_paths(workspace, principal, [folder])
    response = search(workspace, principal, SearchRequest("bitterns", mode="lexical"))
    top = response.results[0]
    assert (top.path, top.title, top.heading_path) == ("report.pdf", "Bird Report 2026", ["page 2"])
    assert top.citation.page == 2  # the citation itself names the page
    fetched = fetch_chunks(workspace, principal, [top.chunk_id]).chunks[0]
    assert fetched.citation == top.citation
    assert "41 bitterns" in top.excerpt
    window = read_document(
        workspace,
        principal,
        top.document_id,
        offset=top.citation.char_start,
        limit_chars=top.citation.char_end - top.citation.char_start,
    )
    assert window.content.startswith("[page 2]")  # the cited range opens with its page marker
    assert (window.line_start, window.line_end) == (top.citation.line_start, top.citation.line_end)
    outline = document_outline(workspace, principal, top.document_id)
    assert [(s.title, s.level) for s in outline.sections] == [("page 1", 1), ("page 2", 1)]
    markdown = search(workspace, principal, SearchRequest("herons", mode="lexical")).results
    assert markdown and all(r.citation.page is None for r in markdown if r.path != "report.pdf")
    page2 = outline.sections[1]
    assert page2.char_start <= top.citation.char_start < top.citation.char_end <= page2.char_end


def test_html_keeps_main_text_and_headings(workspace: Workspace, tmp_path: Path) -> None:
    folder = build_corpus(tmp_path)
    principal = workspace.local_principal()
    add_paths(workspace, principal, [folder])
    hits = search(workspace, principal, SearchRequest("heronries", mode="lexical")).results
    assert hits[0].path == "herons.html"
    assert hits[0].title == "Grey herons"
    assert hits[0].heading_path == ["Grey herons", "Nesting"]
    outline = document_outline(workspace, principal, hits[0].document_id)
    assert [s.heading_path for s in outline.sections] == [
        ["Grey herons"],
        ["Grey herons", "Nesting"],
    ]
    for boilerplate in ("owls", "tracking", "footer"):  # nav, script, footer are not indexed
        assert (
            search(workspace, principal, SearchRequest(boilerplate, mode="lexical")).results == []
        )
    content = read_document(workspace, principal, hits[0].document_id).content
    assert "```\n# not a heading\nheron.wait()\n```" in content


def test_html_conversion_escapes_text_that_looks_like_structure() -> None:
    page = html_to_text(
        "<body><p># hash</p><p>===</p><p>- dash</p><p>1. one</p><ul><li>item</li></ul>"
        "<table><tr><td>a</td><td>b</td></tr></table><pre>```inner```</pre></body>"
    )
    assert page.content.split("\n\n") == [
        "\\# hash",
        "\\===",
        "\\- dash",
        "\\1. one",
        "- item",
        "a | b",
        "````\n```inner```\n````",
    ]
    assert page.title is None


def test_html_in_a_declared_charset_is_decoded() -> None:
    latin = '<meta charset="iso-8859-1"><p>caf\xe9</p>'.encode("latin-1")
    assert decode_html(latin) == '<meta charset="iso-8859-1"><p>café</p>'
    assert decode_html(b"<p>caf\xe9</p>") is None  # neither UTF-8 nor declared


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.4\nnot really a pdf", "unreadable PDF"),
        (b"", "unreadable PDF"),
    ],
)
def test_broken_pdfs_are_skipped_with_a_reason(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(data)
    extracted = pdf_to_text(path)
    assert (extracted.content, extracted.reason) == (None, reason)


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Field Notes", "Field Notes"),
        ("Microsoft Word - draft3.docx", None),
        ("report-final.pdf", None),
        ("Untitled", None),
        ("   ", None),
    ],
)
def test_generated_pdf_titles_are_ignored(tmp_path: Path, title: str, expected: str | None) -> None:
    path = write_pdf(tmp_path / "t.pdf", [["Field notes from the heronry, spring."]], title=title)
    assert pdf_to_text(path).title == expected


def test_a_pdf_page_without_text_keeps_the_other_page_numbers(tmp_path: Path) -> None:
    first, third = "The first page of the report.", "The third page: herons counted."
    path = write_pdf(tmp_path / "mixed.pdf", [[first], [], [third]])
    extracted = pdf_to_text(path)
    assert extracted.content == f"\f[page 1]\n\n{first}\n\n\f[page 3]\n\n{third}\n"
    assert extracted.pages == 3 and extracted.title is None


def test_code_is_indexed_only_when_asked(workspace: Workspace, tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "app.py").write_text("def main():\n    return 'quokka'\n")
    (folder / "README.md").write_text("# Readme\n")
    principal = workspace.local_principal()
    first = add_paths(workspace, principal, [folder])
    assert (first.added, dict(first.skipped)) == (1, {"code or config (use --code)": 1})
    options = IngestOptions(selection=Selection(code=True))
    second = add_paths(workspace, principal, [folder], options)
    assert (second.added, second.unchanged, dict(second.skipped)) == (1, 1, {})
    kinds = dict(workspace.conn.execute("SELECT path, kind FROM document").fetchall())
    assert kinds == {"README.md": "markdown", "app.py": "code"}


def test_hostile_html_and_pdf_are_skips_not_failures(workspace: Workspace, tmp_path: Path) -> None:
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "deep.html").write_text("<body>" + "<div>" * 5000 + "deep" + "</div>" * 5000)
    (folder / "empty.html").write_text("<html><body><nav>only navigation</nav></body></html>")
    (folder / "fake.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >>")
    (folder / "fine.md").write_text("# Fine\n")
    report = add_paths(workspace, workspace.local_principal(), [folder])
    assert (report.added, report.errors) == (1, [])
    assert report.skipped == {"HTML nested too deeply": 1, "no text": 1, "unreadable PDF": 1}


_TOKENS = [*"ab #=-*_`~<>|+1.)\\{}[]", "\n", "  ", "é", "---", "```", "{ #x }", "## "]
_TEXT = st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=12).map("".join)


@st.composite
def _html_blocks(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Random blocks of a page and the headings (as the page shows them) it has."""
    parts, headings = [], []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["h1", "h2", "h3", "p", "li", "pre", "td"]))
        text = draw(_TEXT)
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if kind == "li":
            parts.append(f"<ul><li>{escaped}</li></ul>")
        elif kind == "td":
            parts.append(f"<table><tr><td>{escaped}</td><td>{escaped}</td></tr></table>")
        else:
            parts.append(f"<{kind}>{escaped}</{kind}>")
        if kind.startswith("h") and " ".join(text.split()):
            headings.append(" ".join(text.split()))
    return "<body>" + "".join(parts) + "</body>", headings


@settings(max_examples=150, deadline=None)
@given(page=_html_blocks())
def test_the_only_headings_of_html_text_are_the_pages_own(page: tuple[str, list[str]]) -> None:
    html, headings = page
    content = html_to_text(html).content
    titles = [h.title for h in outline(content, "html")]
    # each heading reads as the Markdown heading of its text would (a closing '#' run and an
    # attribute list are not part of a title), and nothing else is a heading
    expected = [outline(f"# {heading}", "markdown")[0].title for heading in headings]
    assert titles == expected
