"""PDF files as text with page markers, through pypdf.

The stored content is each page's extracted text after a marker line `\\f[page N]` (a form
feed, as `pdftotext` separates pages, then the page number; `\\f[page N (iv)]` when the PDF
prints another label on that page), so the chunker opens one section per page: every chunk's
heading path names its page (`page 2`), outlines list the pages, and line ranges stay exact in
the stored text. The text is NFKC-normalised (`normalise`: ligatures become letters). Pages
without text, or with fewer than MIN_PAGE_WORD_CHARS letters and digits, are left out (their
numbers are not reused); a PDF with no text page (a scan without OCR) is not a document.
"""

from __future__ import annotations

import functools
import io
import logging
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

PAGE_MARKER = re.compile(r"\f\[page (\d+)(?: \(([^()\]\n]*)\))?\]")
NO_TEXT = "PDF without text (scanned?)"
# A page with fewer letters and digits than this is not a text page: a scan whose only text is a
# layer name or a scanner's stamp ("Background" on each page of an image-only PDF), a page
# number. Such pages are left out, and a PDF without any text page is skipped.
MIN_PAGE_WORD_CHARS = 20
# The longest printed page label kept in a page marker.
MAX_LABEL_CHARS = 24
ENCRYPTED = "encrypted PDF"
UNREADABLE = "unreadable PDF"

_LINE_BREAKS = re.compile(r"\r\n|\r|\f|\v")
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


def pdf_to_text(pdf: Path | bytes) -> PdfText:
    """The text of a PDF file (its path, or its bytes)."""
    # pypdf reports recoverable problems of odd files on its logger; the outcome (text, or a
    # skip reason) is what the user sees, not a warning per damaged object.
    # (Its modules log on child loggers, which inherit this level.)
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        return _extract(io.BytesIO(pdf) if isinstance(pdf, bytes) else pdf)
    finally:
        logger.setLevel(level)


def _extract(path: Path | io.BytesIO) -> PdfText:
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
    parts = []
    for number, page in enumerate(pages, start=1):
        try:
            text = normalise(_clean(page.extract_text() or ""))
        except Exception:  # one damaged page must not lose the others
            text = ""
        if _word_chars(text) >= MIN_PAGE_WORD_CHARS:
            parts.append(f"{page_marker(number, labels[number - 1])}\n\n{text}")
    if not parts:
        return PdfText(None, pages=len(pages), reason=NO_TEXT)
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
    """Line breaks as `\\n` (a form feed only ever starts a page marker), no trailing spaces."""
    text = _LINE_BREAKS.sub("\n", text)
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
