"""Per-file progress on a terminal: `indexing [#####-----] 120/400 files  0:42 elapsed  ETA 1:10`.

Drawn on stderr only when it is a terminal (quiet in pipes, logs and CI), at most ten times a
second, and erased when done so the one-line summary stands alone. The ETA is the remaining files
at the rate so far: rough when file sizes vary, but it moves per file, not per write batch.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

BAR_WIDTH = 24
REDRAW_SECONDS = 0.1
TICK_SECONDS = 1.0


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(label: str, done: int, total: int, elapsed: float) -> str:
    """The text of one frame (no line break)."""
    filled = BAR_WIDTH * done // total if total else BAR_WIDTH
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    eta = "ETA " + _clock(elapsed * (total - done) / done) if 0 < done < total else ""
    return f"{label} [{bar}] {done}/{total} files  {_clock(elapsed)} elapsed  {eta}".rstrip()


@contextlib.contextmanager
def file_progress(
    label: str, stream: TextIO | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """A `progress(done, total)` callback drawing on `stream` (default stderr) when it is a
    terminal; None (no callback) otherwise. The line is also redrawn every second, so the
    elapsed time moves while the model loads or a file embeds."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield None
        return
    started = time.monotonic()
    state = {"done": 0, "total": 0, "drawn": 0.0}
    lock = threading.Lock()
    finished = threading.Event()

    def draw(now: float) -> None:
        state["drawn"] = now
        line = progress_line(label, state["done"], state["total"], now - started)
        out.write("\r\x1b[2K" + line)
        out.flush()

    def update(done: int, total: int) -> None:
        with lock:
            state["done"], state["total"] = done, total
            now = time.monotonic()
            if now - state["drawn"] >= REDRAW_SECONDS or done >= total:
                draw(now)

    def tick() -> None:
        while not finished.wait(TICK_SECONDS):
            with lock:
                if state["drawn"]:
                    draw(time.monotonic())

    ticker = threading.Thread(target=tick, name="kbmcp-progress", daemon=True)
    ticker.start()
    try:
        yield update
    finally:
        finished.set()
        ticker.join()
        with lock:
            if state["drawn"]:
                out.write("\r\x1b[2K")
                out.flush()
