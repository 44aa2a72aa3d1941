"""PDF files as text with page markers, through pypdf.

The stored content is each page's extracted text after a marker line `\\f[page N]` (a form
feed, as `pdftotext` separates pages, then the page number), so the chunker opens one section per
page: every chunk's heading path names its page (`page 2`), outlines list the pages, and line
ranges stay exact in the stored text. Pages without text are left out (their numbers are not
reused); a PDF with no text at all (a scan without OCR) is not a document.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from pathlib import Path

PAGE_MARKER = re.compile(r"\f\[page (\d+)\]")
NO_TEXT = "PDF without text (scanned?)"
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


def page_marker(number: int) -> str:
    return f"\f[page {number}]"


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
    parts = []
    for number, page in enumerate(pages, start=1):
        try:
            text = _clean(page.extract_text() or "")
        except Exception:  # one damaged page must not lose the others
            text = ""
        if text:
            parts.append(f"{page_marker(number)}\n\n{text}")
    if not parts:
        return PdfText(None, pages=len(pages), reason=NO_TEXT)
    return PdfText("\n\n".join(parts) + "\n", _title(reader), len(pages))


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
