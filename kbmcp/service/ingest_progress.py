"""Where an add stands, for a progress display: files, bytes and chunks, and the file being
read (a long PDF, page by page) or embedded. Measured in bytes, not files, so one large file
moves the bar while it embeds (a file counts its bytes in proportion to its chunks that have
vectors) and the rate, hence an ETA, does not depend on how the work is split into files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kbmcp.service.ingest_write import PendingDocument


@dataclass(frozen=True)
class IngestProgress:
    """One moment of an add. A file is done when it is skipped, unchanged, failed or its
    vectors are computed; `bytes_done` counts done files whole and the file(s) being embedded in
    proportion of their chunks. `current_*`: the file being embedded, or else the one being
    read (`current_action` says which; None when none is), with its chunks embedded or, for a
    PDF being read, its pages."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    chunks_embedded: int
    current_file: str | None = None
    current_chunks_done: int = 0
    current_chunks_total: int = 0
    current_action: str = "embedding"  # or "reading"
    current_pages_done: int = 0
    current_pages_total: int = 0


class ProgressTracker:
    """Turns the add's counters into `IngestProgress` for an `on_progress` callback."""

    def __init__(
        self, files: Iterable[Path], on_progress: Callable[[IngestProgress], None]
    ) -> None:
        self.sizes = {str(path): _size(path) for path in files}
        self.bytes_total = sum(self.sizes.values())
        self.on_progress = on_progress
        self.files_seen = 0
        self.bytes_seen = 0  # bytes of the files read so far (done or queued)
        # The file being read (extracted), from `read` to `saw`: nothing embeds meanwhile (the
        # add reads and embeds in turn), so the display names it rather than a queued file.
        self.reading: Path | None = None
        self.pages = (0, 0)  # a PDF's pages read, of its pages

    def read(self, path: Path) -> None:
        """A file's reading starts (a PDF's extraction can take minutes)."""
        self.reading, self.pages = path, (0, 0)

    def read_pages(self, done: int, total: int) -> None:
        """`done` of the PDF's `total` pages are read."""
        self.pages = (done, total)

    def saw(self, path: Path) -> None:
        """A file was read (and skipped, found unchanged or queued)."""
        self.reading = None
        self.files_seen += 1
        self.bytes_seen += self.sizes.get(str(path), 0)

    def report(self, in_progress: list[PendingDocument], chunks_embedded: int) -> None:
        waiting = 0.0
        for document in in_progress:
            size = self.sizes.get(document.source or "", 0)
            chunks = len(document.spans) or 1
            waiting += size * (chunks - min(document.embedded, chunks)) / chunks
        current = next(
            (d for d in in_progress if d.embedded), in_progress[0] if in_progress else None
        )
        reading = self.reading is not None
        if reading:
            current_file: str | None = str(self.reading)
        else:
            current_file = None if current is None else (current.source or current.path)
        self.on_progress(
            IngestProgress(
                files_done=self.files_seen - len(in_progress),
                files_total=len(self.sizes),
                bytes_done=max(0, int(self.bytes_seen - waiting)),
                bytes_total=self.bytes_total,
                chunks_embedded=chunks_embedded,
                current_file=current_file,
                current_chunks_done=0 if reading or current is None else current.embedded,
                current_chunks_total=0 if reading or current is None else len(current.spans),
                current_action="reading" if reading else "embedding",
                current_pages_done=self.pages[0] if reading else 0,
                current_pages_total=self.pages[1] if reading else 0,
            )
        )

    def finish(self, chunks_embedded: int) -> None:
        self.files_seen = len(self.sizes)
        self.bytes_seen = self.bytes_total
        self.report([], chunks_embedded)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
