"""Reading a file into the text that is stored and chunked, or the reason it is skipped.

Markdown, reStructuredText, plain text and code are stored as they are (UTF-8). HTML is stored
as Markdown-shaped main text (`kbmcp.ingest.html`) and PDF as page-marked text
(`kbmcp.ingest.pdf`). A file that cannot be read never stops a run: it is a skip with a reason.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

from kbmcp.ingest.html import decode_html, html_to_text
from kbmcp.ingest.pdf import pdf_to_text
from kbmcp.ingest.walker import SYMLINK_LOOP, SourceFile

BINARY_SNIFF_BYTES = 8192
MAX_FILE_BYTES = 50 * 1024 * 1024

BINARY = "binary"
NOT_UTF8 = "not UTF-8"
TOO_LARGE = f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB"
NO_TEXT = "no text"
UNREADABLE_HTML = "HTML nested too deeply"


@dataclass(frozen=True)
class Extracted:
    content: str | None  # None when skipped
    kind: str = "text"
    title: str | None = None  # a title the format itself carries (PDF info, HTML <h1>/<title>)
    reason: str | None = None  # why it is skipped


def read_source(source: SourceFile) -> Extracted:
    """The stored text of one file, or why it is skipped."""
    data, reason = _read_bytes(source.path)
    if data is None:
        return Extracted(None, source.kind, reason=reason)
    if source.kind == "pdf":
        pdf = pdf_to_text(source.path)
        return Extracted(pdf.content, "pdf", pdf.title, pdf.reason)
    if source.kind == "html":
        html = decode_html(data)
        if html is None:
            return Extracted(None, "html", reason=NOT_UTF8)
        try:
            page = html_to_text(html)
        except RecursionError:  # nesting deeper than Python's stack: a hostile page
            return Extracted(None, "html", reason=UNREADABLE_HTML)
        if not page.content.strip():
            return Extracted(None, "html", reason=NO_TEXT)
        return Extracted(page.content + "\n", "html", page.title)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return Extracted(None, source.kind, reason=BINARY)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Extracted(None, source.kind, reason=NOT_UTF8)
    return Extracted(text.removeprefix("\ufeff"), source.kind)


def _read_bytes(path: Path) -> tuple[bytes | None, str | None]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None, TOO_LARGE
        return path.read_bytes(), None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, SYMLINK_LOOP
        if isinstance(exc, IsADirectoryError):
            return None, "not a regular file"
        return None, f"unreadable ({exc.strerror or type(exc).__name__})"
