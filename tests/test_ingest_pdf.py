"""PDF text as a reader types it (issue 19, item 5): ligature glyphs become letters (NFKC, with
offsets into the stored text), an image-only PDF whose only text is a stray label is skipped,
and pages carry their printed labels."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kbmcp.ingest.pdf import normalise, pdf_to_text
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import add_paths
from kbmcp.service.read import document_outline, read_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.pdf_fixture import write_pdf

# A German handbook set with ligature glyphs (TeX and InDesign draw "ff", "fi" as one glyph):
# "begriffe" occurs 8 times (once in "Grundbegriffe"), always as begri + the ff glyph + e.
GERMAN = [
    [
        "Grundbegriﬀe der Vogelkunde: Begriﬀe und Deﬁnitionen.",
        "Die Begriﬀe werden im Glossar erklärt; alle Begriﬀe sind ﬂach geordnet.",
    ],
    [
        "Weitere Begriﬀe: Reiher, Störche und Kraniche. Eﬃziente Zählung.",
        "Begriﬀe aus der Feldarbeit ergänzen die Begriﬀe der Theorie.",
    ],
    ["Zusammenfassung: sechs Begriﬀe, Auﬂösung und Schluss."],
]


def test_ligatures_are_letters_and_citations_point_into_the_stored_text(
    tmp_path: Path, workspace: Workspace
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    write_pdf(folder / "handbuch.pdf", GERMAN, title="Handbuch")
    principal = workspace.local_principal()
    assert add_paths(workspace, principal, [folder]).added == 1
    hits = search(workspace, principal, SearchRequest("Begriffe", mode="lexical")).results
    assert {hit.path for hit in hits} == {"handbuch.pdf"}
    text = read_document(workspace, principal, hits[0].document_id).content
    assert text.lower().count("begriffe") == 8 and "ﬀ" not in text and "ﬁ" not in text
    assert "Definitionen" in text and "Effiziente" in text and "Auflösung" in text
    for hit in hits:  # every citation's range is a range of the stored, normalised text
        cited = text[hit.citation.char_start : hit.citation.char_end]
        assert "Begriffe" in cited
        assert hit.citation.page == int(hit.heading_path[0].split()[1])
    # the chunks are exact slices of the stored text (offsets were taken after normalising)
    for start, end, chunk in workspace.conn.execute(
        "SELECT c.char_start, c.char_end, c.text FROM chunk AS c JOIN document AS d "
        "ON c.revision_id = d.current_revision_id"
    ):
        assert text[start:end] == chunk


def test_what_else_normalising_changes() -> None:
    """NFKC of a PDF's text: compatibility forms become what a reader types; superscripts,
    subscripts and fractions keep their look (x2 and H2O would mean something else)."""
    assert normalise("ＰＤＦ ｆｉｌｅ") == "PDF file"  # full-width forms
    assert normalise("10\u00a0km") == "10 km"  # a non-breaking space
    assert normalise("wait…") == "wait..."
    assert normalise("ﬁsh ﬂy ﬀ ﬃ ﬄ ﬆ") == "fish fly ff ffi ffl st"
    assert normalise("x² + H₂O = ½ and 1º") == "x² + H₂O = ½ and 1º"
    assert normalise("ﬁx x² ﬁx") == "fix x² fix"
    assert normalise("Ⅳ ㎏ ℃") == "IV kg °C"


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40))
def test_normalising_is_nfkc_except_the_kept_characters(text: str) -> None:
    """The fast path (already normalised: returned as is) and the split around kept runs give
    NFKC itself on every text without superscripts, subscripts or fractions."""
    kept = [c for c in text if unicodedata.decomposition(c).startswith(("<super>", "<sub>", "<fr"))]
    if not kept:
        assert normalise(text) == unicodedata.normalize("NFKC", text)
    else:
        assert [c for c in normalise(text) if c in kept] == kept


def test_an_image_only_pdf_is_skipped_and_a_scan_keeps_its_typed_page(
    tmp_path: Path, workspace: Workspace
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    # four scanned pages whose only text is a layer's name (poppler finds no words)
    every = frozenset(range(4))
    write_pdf(folder / "scan.pdf", [["Background"]] * 4, scanned=every)
    # scanned pages with a page number each, and one typed page: only that page is text
    typed = "Typed cover letter: the heron survey results are attached as scans."
    pages = [["1"], [typed], ["3"], ["4"]]
    write_pdf(folder / "letter.pdf", pages, scanned=frozenset({0, 2, 3}))
    report = add_paths(workspace, workspace.local_principal(), [folder])
    assert report.added == 1 and report.skipped == {"PDF without text (scanned?)": 1}
    assert pdf_to_text(folder / "letter.pdf").content == f"\f[page 2]\n\n{typed}\n"
    hits = search(
        workspace, workspace.local_principal(), SearchRequest("Background", mode="lexical")
    ).results
    assert hits == []


def test_pages_carry_their_printed_labels(tmp_path: Path, workspace: Workspace) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pages = [[f"Preface page about wading birds, part {n}."] for n in ("one", "two", "three")] + [
        [f"Chapter page {n}: the grey heron and its nest."] for n in range(1, 4)
    ]
    # pages i-iii (roman), then 1, 2, 3: physical page 4 prints "1"
    write_pdf(folder / "book.pdf", pages, page_labels="0 << /S /r >> 3 << /S /D >>")
    principal = workspace.local_principal()
    add_paths(workspace, principal, [folder])
    hits = search(workspace, principal, SearchRequest("Chapter page 2", mode="lexical")).results
    top = hits[0]
    assert top.citation.page == 5 and top.heading_path == ["page 5 (2)"]
    outline = document_outline(workspace, principal, top.document_id)
    assert [section.title for section in outline.sections] == [
        "page 1 (i)",
        "page 2 (ii)",
        "page 3 (iii)",
        "page 4 (1)",
        "page 5 (2)",
        "page 6 (3)",
    ]
    # a PDF without labels (or labels equal to the numbers) keeps plain markers
    write_pdf(folder / "plain.pdf", pages, page_labels="0 << /S /D >>")
    assert "\f[page 4]\n" in (pdf_to_text(folder / "plain.pdf").content or "")
