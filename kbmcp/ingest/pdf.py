"""PDF files as text with page markers, through pypdf.

The stored content is each page's extracted text after a marker line `\\f[page N]` (a form
feed, as `pdftotext` separates pages, then the page number; `\\f[page N (iv)]` when the PDF
prints another label on that page), so the chunker opens one section per page: every chunk's
heading path names its page (`page 2`), outlines list the pages, and line ranges stay exact in
the stored text. The text is NFKC-normalised (`normalise`: ligatures become letters), without
control characters. Pages without text, and scanned pages (an image, and fewer than
MIN_PAGE_WORD_CHARS letters and digits), are left out (their numbers are not reused); a PDF
with no text page is not a document: "scanned?" when it has scanned pages, else "without text".
"""

from __future__ import annotations

import functools
import io
import logging
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PAGE_MARKER = re.compile(r"\f\[page (\d+)(?: \(([^()\]\n]*)\))?\]")
NO_TEXT = "PDF without text (scanned?)"
EMPTY = "PDF without text"
# A page with fewer letters and digits than this is not a text page of its own. With an image it
# is a scan, whose text is a layer name or a scanner's stamp ("Background" on each page of an
# image-only PDF) or a page number: left out, and a PDF of scans only is skipped as scanned.
# Without an image it is short text: a page number beside text pages (left out), or the whole
# text of a PDF that has nothing longer ("Hello, World!", a one-line form: kept). A PDF whose
# pages hold neither text nor an image is skipped as without text.
MIN_PAGE_WORD_CHARS = 20
# The longest printed page label kept in a page marker.
MAX_LABEL_CHARS = 24
ENCRYPTED = "encrypted PDF"
UNREADABLE = "unreadable PDF"

_LINE_BREAKS = re.compile(r"\r\n|\r|\f|\v")
# Control characters left in extracted text: TeX's math fonts (cmsy, cmmi) without a map to
# Unicode put symbols at codes 0-31, which pypdf returns as they are ("T \x12P(X)" where the page
# shows "T ⊆ P(X)"). Which symbol a code is depends on the font, which the text no longer says:
# they are dropped (the rest of the formula stays searchable, and no control character reaches
# a terminal, an excerpt or an embedding).
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class PdfText:
    content: str | None  # None when skipped
    title: str | None = None
    pages: int = 0
    reason: str | None = None  # why it is skipped


def page_marker(number: int, label: str | None = None) -> str:
    """`\f[page 5]`, or with the page's printed label when the PDF defines one that differs
    from its number: `\f[page 5 (iv)]`."""
    return f"\f[page {number}]" if label is None else f"\f[page {number} ({label})]"


def pdf_to_text(pdf: Path | bytes, on_page: Callable[[int, int], None] | None = None) -> PdfText:
    """The text of a PDF file (its path, or its bytes). `on_page(pages done, pages)` is called
    before each page is extracted (a long PDF takes minutes: a progress display names it)."""
    # pypdf reports recoverable problems of odd files on its logger; the outcome (text, or a
    # skip reason) is what the user sees, not a warning per damaged object.
    # (Its modules log on child loggers, which inherit this level.)
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        return _extract(io.BytesIO(pdf) if isinstance(pdf, bytes) else pdf, on_page)
    finally:
        logger.setLevel(level)


def _extract(path: Path | io.BytesIO, on_page: Callable[[int, int], None] | None) -> PdfText:
    from pypdf import PdfReader  # imported here: only PDF files pay for it
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            return PdfText(None, reason=ENCRYPTED)
        pages = list(reader.pages)
    except PyPdfError as exc:
        if "encrypt" in str(exc).lower() or "cryptography" in str(exc).lower():
            return PdfText(None, reason=ENCRYPTED)
        return PdfText(None, reason=UNREADABLE)
    except Exception:  # a damaged or hostile file can fail anywhere in the parser
        return PdfText(None, reason=UNREADABLE)
    labels = _page_labels(reader, len(pages))
    parts: list[str] = []  # text pages
    short: list[str] = []  # pages with a little text and no image
    scans = 0
    for number, page in enumerate(pages, start=1):
        if on_page is not None:
            on_page(number - 1, len(pages))
        try:
            text = normalise(_clean(page.extract_text() or ""))
        except Exception:  # one damaged page must not lose the others
            text = ""
        words = _word_chars(text)
        if words >= MIN_PAGE_WORD_CHARS:
            parts.append(f"{page_marker(number, labels[number - 1])}\n\n{text}")
        elif _draws_image(page):
            scans += 1  # a scan: its few letters are a stamp, a layer's name, a page number
        elif words:
            short.append(f"{page_marker(number, labels[number - 1])}\n\n{text}")
    # Beside text pages, a short page is a page number or a running head: left out. Without
    # any, the short pages are the text ("Hello, World!", a one-line form, a cover).
    parts = parts or short
    if not parts:
        return PdfText(None, pages=len(pages), reason=NO_TEXT if scans else EMPTY)
    return PdfText("\n\n".join(parts) + "\n", _title(reader), len(pages))


@functools.cache
def _kept_runs() -> re.Pattern[str]:
    """Runs of the characters NFKC would rewrite into others that mean something else:
    superscripts, subscripts and vulgar fractions (x², H₂O, ½ would read x2, H2O, 1⁄2). Built on
    first use (a scan of every code point, ~0.25 s), by the first PDF that needs normalising."""
    kept = "".join(
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.decomposition(chr(code)).startswith(("<super>", "<sub>", "<fraction>"))
    )
    return re.compile(f"([{re.escape(kept)}]+)")


def normalise(text: str) -> str:
    """PDF text as a reader types it: Unicode compatibility normalisation (NFKC), so ligature
    glyphs become letters (ﬁ → fi, ﬀ → ff: "Begriffe" is found), full-width forms ASCII, a
    non-breaking space a space, … three dots; superscripts, subscripts and fractions are kept.
    The stored text is the normalised one, so every offset (chunks, citations, reads) points into
    it; it may be longer than the PDF's own text (one ligature glyph, two letters)."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    parts = _kept_runs().split(text)  # odd items: kept runs
    return "".join(
        part if index % 2 else unicodedata.normalize("NFKC", part)
        for index, part in enumerate(parts)
    )


def _word_chars(text: str) -> int:
    return sum(character.isalnum() for character in text)


def _draws_image(page: object) -> bool:
    """Whether the page draws an image (a scanned page is one, drawn over the whole page): an
    image XObject of its resources called by a `Do` of its content stream (resources may list
    images a page does not draw). A page that cannot be read so far counts as drawing none."""
    try:
        resources = page.get("/Resources")  # type: ignore[attr-defined]
        resources = resources.get_object() if resources is not None else None
        xobjects = resources.get("/XObject") if resources is not None else None
        if xobjects is None:
            return False
        images = {
            name.encode() if isinstance(name, str) else name
            for name, item in xobjects.get_object().items()
            if item.get_object().get("/Subtype") == "/Image"
        }
        if not images:
            return False
        contents = page.get_contents()  # type: ignore[attr-defined]
        if contents is None:
            return False
        for operands, operator in contents.operations:
            if operator == b"Do" and operands and str(operands[0]).encode() in images:
                return True
        return False
    except Exception:  # damaged resources or content: judge the page by its text alone
        return False


def _page_labels(reader: object, count: int) -> list[str | None]:
    """Each page's printed label when the PDF defines page labels and it differs from the
    page's number (roman front matter, "A-1"), else None."""
    labels: list[str | None] = [None] * count
    try:
        if "/PageLabels" not in reader.trailer["/Root"]:  # type: ignore[attr-defined]
            return labels
        defined = list(reader.page_labels)  # type: ignore[attr-defined]
    except Exception:  # damaged labels: physical numbers will do
        return labels
    for index, label in enumerate(defined[:count]):
        clean = _LABEL_UNSAFE.sub("", normalise(str(label))).strip()[:MAX_LABEL_CHARS]
        if clean and clean != str(index + 1):
            labels[index] = clean
    return labels


_LABEL_UNSAFE = re.compile(r"[()\[\]\x00-\x1f\x7f]")


def _clean(text: str) -> str:
    """Line breaks as `\\n` (a form feed only ever starts a page marker), no control
    characters, no trailing spaces."""
    text = _CONTROLS.sub("", _LINE_BREAKS.sub("\n", text))
    text = _TRAILING_SPACE.sub("\n", text + "\n")
    return _BLANK_RUNS.sub("\n\n", text).strip()


# Titles that word processors and converters write for the user: the file name is as good.
_GENERATED_TITLE = re.compile(
    r"(?:microsoft \w+ - |untitled\b)|\.(?:docx?|odt|rtf|pages|tex|dvi|pdf|indd|pptx?)\s*$",
    re.IGNORECASE,
)


def _title(reader: object) -> str | None:
    try:
        metadata = getattr(reader, "metadata", None)
        title = metadata.title if metadata is not None else None
    except Exception:  # damaged metadata: the file name will do
        return None
    if not isinstance(title, str) or not title.strip() or _GENERATED_TITLE.search(title.strip()):
        return None
    return title.strip()
