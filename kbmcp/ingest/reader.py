"""Reading a file into the text that is stored and chunked, or the reason it is skipped.

Markdown, reStructuredText, plain text and code are stored as they are (UTF-8). HTML is stored
as Markdown-shaped main text (`kbmcp.ingest.html`) and PDF as page-marked text
(`kbmcp.ingest.pdf`). A file that cannot be read never stops a run: it is a skip with a reason.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbmcp.ingest.html import decode_html, html_to_text
from kbmcp.ingest.pdf import pdf_to_text
from kbmcp.ingest.walker import SYMLINK_LOOP, SourceFile, special_file_reason
from kbmcp.store.ingest import FileSignature, RecordedFile

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


@dataclass(frozen=True)
class FileBytes:
    """A file's bytes and its signature taken just before they were read (so a write during the
    read leaves a signature that no longer matches), or why it cannot be read."""

    data: bytes | None
    signature: FileSignature | None = None
    reason: str | None = None

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data or b"").hexdigest()

    def same_bytes(self, recorded: RecordedFile) -> bool:
        """Whether these are the bytes the file was recorded with."""
        return self.data is not None and self.sha256 == recorded.bytes_hash

    def recorded(self, read_key: str, folder: str) -> RecordedFile | None:
        """What to record for a document read from these bytes (None: no signature)."""
        if self.data is None or self.signature is None:
            return None
        return RecordedFile(self.signature, self.sha256, read_key, folder)


# The version of each kind's extraction: bumped when the same bytes give another stored text, so
# that files recorded as unchanged by their signature (kbmcp/store/ingest.py) are
# read again.
# html 2: permalink marks dropped, asides in the main content kept, DocBook navigation dropped,
# several <code> blocks in one <pre> on lines of their own.
# html 3: Sphinx tables of contents dropped, rubrics ("Footnotes") as headings.
# pdf 2: NFKC (ligatures), pages with under 20 letters and digits left out, printed labels.
# pdf 3: control characters dropped; short pages kept when nothing longer is (scans: not).
EXTRACTION_VERSIONS = {"html": 3, "pdf": 3}


def extraction_version(kind: str) -> int:
    return EXTRACTION_VERSIONS.get(kind, 1)


def read_source(source: SourceFile) -> Extracted:
    """The stored text of one file, or why it is skipped."""
    return extract(source, read_file(source.path))


def file_signature(path: Path) -> FileSignature | None:
    """The file's size, mtime and inode (following a link), or None when it cannot be stat'ed."""
    checked_ns = time.time_ns()
    try:
        status = path.stat()
    except (OSError, RuntimeError):  # (RuntimeError: a symlink loop on Python < 3.13)
        return None
    return FileSignature(status.st_size, status.st_mtime_ns, status.st_ino, checked_ns)


def read_file(path: Path) -> FileBytes:
    """The file's bytes with its signature, or why it cannot be read."""
    signature = file_signature(path)
    data, reason = _read_bytes(path)
    return FileBytes(data, signature, reason)


def extract(
    source: SourceFile, file: FileBytes, on_page: Callable[[int, int], None] | None = None
) -> Extracted:
    """The stored text of a file read by `read_file`, or why it is skipped. `on_page(pages
    done, pages)`: the progress of a PDF's extraction."""
    data = file.data
    if data is None:
        return Extracted(None, source.kind, reason=file.reason)
    if source.kind == "pdf":
        pdf = pdf_to_text(data, on_page)
        return Extracted(pdf.content, "pdf", pdf.title, pdf.reason)
    if source.kind == "html":
        html = decode_html(data)
        if html is None:
            return Extracted(None, "html", reason=NOT_UTF8)
        try:
            page = html_to_text(html)
        except RecursionError:  # nesting deeper than Python's stack: a hostile page
            return Extracted(None, "html", reason=UNREADABLE_HTML)
        if page.reason is not None:
            return Extracted(None, "html", reason=page.reason)
        if not page.content.strip():
            return Extracted(None, "html", reason=NO_TEXT)
        return Extracted(page.content + "\n", "html", page.title)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return Extracted(None, source.kind, reason=BINARY)
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return Extracted(None, source.kind, reason=NOT_UTF8)
    if not text.strip():  # an empty file (a placeholder, a stub): no document without a chunk
        return Extracted(None, source.kind, reason=NO_TEXT)
    return Extracted(text, source.kind)


def _read_bytes(path: Path) -> tuple[bytes | None, str | None]:
    """The bytes of a regular file only. A FIFO, a socket or a device is never read: opening a
    FIFO for reading waits for a writer (forever), a device may never end (/dev/zero) or act
    when opened. The type is checked before opening (a device is not even opened), and again
    on the opened descriptor, which is opened without blocking, in case the path was replaced
    in between."""
    try:
        reason = special_file_reason(os.stat(path).st_mode)
        if reason is not None:
            return None, reason
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as file:
            status = os.fstat(file.fileno())
            reason = special_file_reason(status.st_mode)
            if reason is not None:
                return None, reason
            if status.st_size > MAX_FILE_BYTES:
                return None, TOO_LARGE
            data = file.read(MAX_FILE_BYTES + 1)  # (it may have grown since)
        return (None, TOO_LARGE) if len(data) > MAX_FILE_BYTES else (data, None)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, SYMLINK_LOOP
        return None, f"unreadable ({exc.strerror or type(exc).__name__})"
