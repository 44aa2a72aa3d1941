"""Progress lines on a terminal, drawn by rich: `kbmcp add` measured in bytes, `reembed` and
`eval` in chunks.

    indexing ━━━━━━━━━━╸━━━━━━━━━  37%  12.3/33.1 MB  18/155 files  0:00:42  ETA 0:01:10
      embedding docs/manuals/big-manual.pdf: chunk 120 of 950, for 0:00:13

Why these units: a file count says nothing while one large file embeds for minutes (the bar sat at
18/155 files for 13 minutes while its ETA climbed to two hours). The service reports bytes, with
the file being embedded counted in proportion to its chunks that have vectors, so the bar moves
while a large file embeds, and the ETA is the remaining bytes at the recent rate (rich's speed
estimate over the last 30 s), whatever the sizes of the files; it is left out until there is a
rate. The file being embedded, or read (a large PDF's extraction takes minutes: its page), is
shown on a second line once it has taken more than SLOW_FILE_SECONDS:

      reading docs/manuals/big-manual.pdf: page 120 of 950, for 0:00:27

rich draws the lines: it redraws a few times a second (so elapsed time moves during a long
embedding or while the model loads), erases them at the end (the one-line summary stands alone),
and knows the terminal's width. Each line is laid out for that width: the least useful fields are
dropped first, then the bar shrinks, and a long path loses its beginning, so no line is ever
wider than the terminal (a 50-column pane showed wrapped leftovers with the old hand-drawn line).
Nothing is drawn, and no escape code is written, when stderr is not a terminal (pipes, logs, CI).
rich is imported only when a line is drawn.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console

SLOW_FILE_SECONDS = 3.0
REFRESHES_PER_SECOND = 4
MIN_BAR = 10  # narrower than this, the bar is left out rather than drawn useless
MAX_BAR = 40
GAP = "  "


class AddProgress(Protocol):
    """What the display reads of the service's report (kbmcp.service.ingest_progress's
    IngestProgress): files, bytes, and the file being embedded with its chunk counts."""

    @property
    def files_done(self) -> int: ...
    @property
    def files_total(self) -> int: ...
    @property
    def bytes_done(self) -> int: ...
    @property
    def bytes_total(self) -> int: ...
    @property
    def current_file(self) -> str | None: ...
    @property
    def current_chunks_done(self) -> int: ...
    @property
    def current_chunks_total(self) -> int: ...
    @property
    def current_action(self) -> str: ...
    @property
    def current_pages_done(self) -> int: ...
    @property
    def current_pages_total(self) -> int: ...


@dataclass
class Frame:
    """Everything one redraw shows, in numbers (the layout turns it into text)."""

    label: str
    done: float
    total: float | None  # None until the first report (the model may still be loading)
    unit: str  # "bytes" or a noun ("chunk")
    elapsed: float
    remaining: float | None  # seconds, None while unknown
    files: tuple[int, int] | None = None
    current_file: str | None = None
    current_chunks: tuple[int, int] = (0, 0)
    current_for: float = 0.0  # seconds the current file has been the current one
    current_action: str = "embedding"  # or "reading" (a PDF: current_pages)
    current_pages: tuple[int, int] = (0, 0)


def progress_lines(frame: Frame, width: int) -> list[tuple[str, float | None]]:
    """The frame's lines for a terminal `width` columns wide: (text, bar fraction) pairs, where
    a fraction means the text holds a BAR placeholder of the bar's width. Every line fits."""
    if frame.total is None:
        return [(_fit(f"{frame.label}{GAP}{_clock(frame.elapsed)}", width), None)]
    fraction = min(1.0, frame.done / frame.total) if frame.total else 1.0
    head = frame.label
    percent = f"{fraction:4.0%}"
    # Most useful first: they are kept, in this order, while the terminal is wide enough.
    optional = [
        # No ETA until there is a rate to base it on (a first large file moves nothing for a
        # while): "ETA -:--:--" said nothing for the first minute.
        ("eta", "" if frame.remaining is None else f"ETA {_clock(frame.remaining)}"),
        ("amount", _amount(frame.done, frame.total, frame.unit)),
        ("files", "" if frame.files is None else f"{frame.files[0]}/{frame.files[1]} files"),
        ("elapsed", _clock(frame.elapsed)),
    ]
    shown = [(name, text) for name, text in optional if text]
    order = ["amount", "files", "elapsed", "eta"]  # where each goes on the line
    while True:
        fields = [text for name in order for key, text in shown if key == name]
        text = GAP.join([f"{head} {percent}", *fields])
        room = width - len(text) - 1  # the bar and its space
        if room >= MIN_BAR or not shown:
            break
        shown.pop()  # drop the least useful field still shown
    lines: list[tuple[str, float | None]] = []
    if room >= MIN_BAR:
        bar = min(room, MAX_BAR)
        lines.append((f"{head} {BAR * bar} {text[len(head) + 1 :]}", fraction))
    else:
        lines.append((_fit(text, width), None))
    if frame.current_file is not None and frame.current_for >= SLOW_FILE_SECONDS:
        reading = frame.current_action == "reading"
        done, total = frame.current_pages if reading else frame.current_chunks
        noun = "page" if reading else "chunk"
        tails = [f", for {_clock(frame.current_for)}", ""]
        if total:
            tails[:0] = [f": {noun} {done + reading} of {total}{tails[0]}", f": {done}/{total}"]
        head = f"  {frame.current_action} "
        lines.append((_fit_path(head, frame.current_file, tails, width), None))
    return lines


BAR = "\x00"  # stands for one cell of the bar in progress_lines' text


@contextlib.contextmanager
def add_progress(
    label: str, console: Console | None = None, *, clock: Callable[[], float] = time.monotonic
) -> Iterator[Callable[[AddProgress], None] | None]:
    """An `on_progress` callback for the service's add, drawing on stderr (or `console`) when
    it is a terminal; None (no callback, nothing drawn) otherwise."""
    with _display(label, "bytes", console, clock) as display:
        yield None if display is None else display.add_report


@contextlib.contextmanager
def chunk_progress(
    label: str, console: Console | None = None, *, clock: Callable[[], float] = time.monotonic
) -> Iterator[Callable[[int, int], None] | None]:
    """A `progress(chunks done, chunks total)` callback (reembed, eval), drawn as `add_progress`
    draws; None when stderr is not a terminal."""
    with _display(label, "chunk", console, clock) as display:
        yield None if display is None else display.count_report


class _Display:
    """One rich Progress with one task; its renderable lays the task out with progress_lines."""

    def __init__(self, label: str, unit: str, console: Console, clock: Callable[[], float]):
        from rich.progress import Progress

        self.label, self.unit, self.clock = label, unit, clock
        self.extra: dict[str, Any] = {}
        self.current_since = 0.0  # when the current file became the current one
        display = self

        class Lines(Progress):
            def get_renderables(self) -> Iterator[Any]:
                if self.tasks:  # (rich asks once before the task exists)
                    yield display.renderable(self.console.width)

        self.progress = Lines(
            console=console,
            transient=True,
            get_time=clock,
            refresh_per_second=REFRESHES_PER_SECOND,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = self.progress.add_task(label, total=None)

    def add_report(self, report: AddProgress) -> None:
        current = (report.current_file, report.current_action)
        if current != (self.extra.get("current_file"), self.extra.get("current_action")):
            self.current_since = self.clock()
        self.extra = {
            "files": (report.files_done, report.files_total),
            "current_file": report.current_file,
            "current_chunks": (report.current_chunks_done, report.current_chunks_total),
            "current_action": report.current_action,
            "current_pages": (report.current_pages_done, report.current_pages_total),
        }
        self.progress.update(self.task, completed=report.bytes_done, total=report.bytes_total)

    def count_report(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)

    def frame(self) -> Frame:
        task = self.progress.tasks[0]
        current_file = self.extra.get("current_file")
        return Frame(
            label=self.label,
            done=task.completed,
            total=task.total,
            unit=self.unit,
            elapsed=task.elapsed or 0.0,
            remaining=task.time_remaining,
            files=self.extra.get("files"),
            current_file=current_file,
            current_chunks=self.extra.get("current_chunks", (0, 0)),
            current_for=0.0 if current_file is None else self.clock() - self.current_since,
            current_action=self.extra.get("current_action", "embedding"),
            current_pages=self.extra.get("current_pages", (0, 0)),
        )

    def renderable(self, width: int) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        rows = []
        for text, fraction in progress_lines(self.frame(), width):
            if fraction is None:
                rows.append(Text(text, no_wrap=True, overflow="crop"))
                continue
            before, _, after = text.partition(BAR)
            bar_width = text.count(BAR)
            after = after.lstrip(BAR)
            grid = Table.grid()
            grid.add_row(
                Text(before),
                ProgressBar(total=1.0, completed=fraction, width=bar_width),
                Text(after, no_wrap=True, overflow="crop"),
            )
            rows.append(grid)
        return Group(*rows)


@contextlib.contextmanager
def _display(
    label: str, unit: str, console: Console | None, clock: Callable[[], float]
) -> Iterator[_Display | None]:
    if console is None:
        if not sys.stderr.isatty():
            yield None
            return
        from rich.console import Console

        console = Console(file=sys.stderr)
    elif not console.is_terminal:
        yield None
        return
    display = _Display(label, unit, console, clock)
    with display.progress:
        yield display


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _amount(done: float, total: float, unit: str) -> str:
    """`12.3/33.1 MB` (done in the total's unit, as rich's DownloadColumn), `40/950 chunks`."""
    if unit == "bytes":
        from rich.filesize import pick_unit_and_suffix

        factor, suffix = pick_unit_and_suffix(
            int(total), ["bytes", "kB", "MB", "GB", "TB", "PB"], 1000
        )
        if factor == 1:
            return f"{int(done)}/{int(total)} bytes"
        return f"{done / factor:.1f}/{total / factor:.1f} {suffix}"
    return f"{int(done)}/{int(total)} {unit if total == 1 else unit + 's'}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _fit_path(prefix: str, path: str, tails: list[str], width: int) -> str:
    """`prefix + path + tail` in `width` columns with the longest of `tails` that leaves the
    path enough room; the path loses its beginning first (its end, the file's name, says most)."""
    for tail in tails:
        room = width - len(prefix) - len(tail)
        if room >= min(len(path), 16) or tail == tails[-1]:
            if room >= len(path):
                return prefix + path + tail
            if room >= 2:
                return prefix + "…" + path[len(path) - room + 1 :] + tail
    return _fit(prefix + path, width)
