"""Progress that tells the truth (kbmcp/cli/progress.py): measured in bytes (chunks for reembed),
an ETA from the recent rate of those, the file being embedded once it is slow, never wider than
the terminal, erased at the end, and nothing at all (no escape code) when not on a terminal.

Drawn into rich consoles that pretend to be terminals of fixed widths, on a fake clock; and
`kbmcp add` itself on a real pseudo-terminal 50 columns wide."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from kbmcp.cli.progress import (
    BAR,
    SLOW_FILE_SECONDS,
    Frame,
    add_progress,
    chunk_progress,
    progress_lines,
)
from tests import processes
from tests.mcp_support import REPO_ROOT, subprocess_env, write
from tests.patience import ceiling

# CSI sequences (cursor moves, erase, colours) and the lone controls rich writes between frames.
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|[\r\n\x07]")


@dataclass(frozen=True)
class Report:
    """What the service reports during an add (kbmcp.service.ingest_progress.IngestProgress)."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    chunks_embedded: int = 0
    current_file: str | None = None
    current_chunks_done: int = 0
    current_chunks_total: int = 0
    current_action: str = "embedding"
    current_pages_done: int = 0
    current_pages_total: int = 0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def terminal(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    console = Console(
        file=out, force_terminal=True, width=width, color_system="standard", legacy_windows=False
    )
    return console, out


def screen_lines(output: str) -> list[str]:
    """Every stretch of text the terminal showed between control sequences."""
    return [part for part in CONTROL.split(output) if part]


def frame(**changes: object) -> Frame:
    base = {
        "label": "indexing",
        "done": 12_300_000,
        "total": 33_100_000,
        "unit": "bytes",
        "elapsed": 42.0,
        "remaining": 70.0,
        "files": (18, 155),
        "current_file": "/home/me/docs/manuals/storage/very-long-handbook-name.pdf",
        "current_chunks": (120, 950),
        "current_for": 13.0,
    }
    return Frame(**{**base, **changes})  # type: ignore[arg-type]


def shown(lines: list[tuple[str, float | None]]) -> list[str]:
    return [text.replace(BAR, "#") for text, _ in lines]


def test_a_wide_line_has_everything() -> None:
    lines = shown(progress_lines(frame(), 120))
    assert lines[0] == (
        "indexing " + "#" * 40 + "  37%  12.3/33.1 MB  18/155 files  0:00:42  ETA 0:01:10"
    )
    assert lines[1] == (
        "  embedding /home/me/docs/manuals/storage/very-long-handbook-name.pdf: "
        "chunk 120 of 950, for 0:00:13"
    )


@pytest.mark.parametrize("width", [100, 80, 60, 50, 40, 30, 20, 12, 5])
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    for text in shown(progress_lines(frame(), width)):
        assert cell_len(text) <= width, (width, text)


def test_narrow_terminals_keep_the_most_useful_fields() -> None:
    line, path = shown(progress_lines(frame(), 50))
    assert line.startswith("indexing ###") and line.endswith("37%  ETA 0:01:10")
    assert path == "  embedding …/very-long-handbook-name.pdf: 120/950"  # the name, not the root
    assert shown(progress_lines(frame(), 30))[0] == "indexing " + "#" * 16 + "  37%"
    assert shown(progress_lines(frame(), 70))[0] == (
        "indexing ###############  37%  12.3/33.1 MB  18/155 files  ETA 0:01:10"
    )
    assert shown(progress_lines(frame(), 60))[0].endswith("37%  12.3/33.1 MB  ETA 0:01:10")


def test_the_current_file_shows_only_once_it_is_slow() -> None:
    assert len(progress_lines(frame(current_for=SLOW_FILE_SECONDS - 0.5), 120)) == 1
    assert len(progress_lines(frame(current_file=None), 120)) == 1
    assert len(progress_lines(frame(current_for=SLOW_FILE_SECONDS), 120)) == 2


def test_amounts_and_unknown_totals() -> None:
    assert "512/900 bytes" in shown(progress_lines(frame(done=512, total=900), 120))[0]
    chunks = frame(unit="chunk", done=40, total=950, files=None, current_file=None)
    assert shown(progress_lines(chunks, 120))[0].endswith("4%  40/950 chunks  0:00:42  ETA 0:01:10")
    unknown = frame(total=None, elapsed=3.0)  # before the first report: the model is loading
    assert shown(progress_lines(unknown, 120)) == ["indexing  0:00:03"]
    # no rate yet (a first large file is still being read): no ETA rather than "-:--:--"
    assert shown(progress_lines(frame(remaining=None), 120))[0].endswith("18/155 files  0:00:42")


def test_add_progress_on_a_50_column_terminal_follows_bytes_not_files() -> None:
    """One large file between small ones: files stay at 1/3 while its bytes move, and the ETA
    is the remaining bytes at the rate they moved."""
    console, out = terminal(50)
    clock = Clock()
    with add_progress("indexing", console, clock=clock) as update:
        assert update is not None
        total = 100_000_000
        update(Report(0, 3, 0, total))
        for second in range(1, 11):  # 5 MB a second, inside the large file
            clock.now += 1
            update(Report(1, 3, 5_000_000 * second, total, 0, "/data/big.pdf", 5 * second, 100))
        lines = progress_lines(update.__self__.frame(), 50)  # type: ignore[attr-defined]
    first = shown(lines)
    assert first[0].endswith("50%  ETA 0:00:10")  # 50 MB left at 5 MB/s (files would say 0:00:20)
    assert first[1] == "  embedding /data/big.pdf: 50/100"
    assert shown(progress_lines(update.__self__.frame(), 80))[1] == (  # type: ignore[attr-defined]
        "  embedding /data/big.pdf: chunk 50 of 100, for 0:00:09"  # the file came at 0:00:01
    )
    drawn = screen_lines(out.getvalue())
    assert drawn and all(cell_len(text) <= 50 for text in drawn), drawn
    assert "\x1b[2K" in out.getvalue().rsplit("indexing", 1)[1]  # erased when done


def test_chunk_progress_draws_chunks() -> None:
    console, out = terminal(80)
    clock = Clock()
    with chunk_progress("embedding", console, clock=clock) as update:
        assert update is not None
        update(0, 950)
        for _ in range(4):  # 10 chunks a second
            clock.now += 1
            update(40 - 10 * (3 - _), 950)
        line = shown(progress_lines(update.__self__.frame(), 80))[0]  # type: ignore[attr-defined]
    assert line.startswith("embedding ") and "40/950 chunks" in line and "ETA 0:01:31" in line
    assert all(cell_len(text) <= 80 for text in screen_lines(out.getvalue()))


def test_nothing_is_drawn_when_not_on_a_terminal() -> None:
    out = io.StringIO()
    piped = Console(file=out)  # not a terminal: rich sees a plain file
    with add_progress("indexing", piped) as update, chunk_progress("x", piped) as chunks:
        assert update is None and chunks is None
    assert out.getvalue() == ""
    with add_progress("indexing") as update:  # stderr under pytest is not a terminal either
        assert update is None


# ------------------------------------------------------------------ `kbmcp add` on a terminal


def run_add_on_a_terminal(tmp_path: Path, columns: int) -> tuple[str, str]:
    """`kbmcp add` with stderr on a pseudo-terminal `columns` wide: (what the terminal got,
    stdout)."""
    source = write(
        tmp_path / "src", {f"doc{n:02}.md": f"# Doc {n}\n\n" + "words " * 400 for n in range(30)}
    )
    db = tmp_path / "kb.db"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {**subprocess_env(db), "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    process = processes.popen(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "add", str(source)],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + ceiling(120)
    try:
        while True:
            # The terminal's output as it comes; a child that hangs fails the test in time.
            assert select.select([master], [], [], max(0, deadline - time.monotonic()))[0], seen
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        stdout = process.communicate(timeout=max(1, deadline - time.monotonic()))[0].decode()
    finally:
        processes.stop(process)
        os.close(master)
    assert process.returncode == 0, seen.decode(errors="replace")
    return seen.decode(errors="replace"), stdout


def test_kbmcp_add_on_a_50_column_terminal(tmp_path: Path) -> None:
    terminal_output, stdout = run_add_on_a_terminal(tmp_path, 50)
    drawn = screen_lines(terminal_output)
    assert any(text.startswith("indexing") for text in drawn), terminal_output
    assert all(cell_len(text) <= 50 for text in drawn), drawn
    assert "\x1b[2K" in terminal_output  # the line is erased at the end
    assert stdout.startswith("default: added 30, ")  # the summary stands alone on stdout


def test_kbmcp_add_piped_writes_no_escape_code(tmp_path: Path) -> None:
    source = write(tmp_path / "src", {"a.md": "# A\n\nText.\n"})
    db = tmp_path / "kb.db"
    run = processes.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "add", str(source)],
        cwd=REPO_ROOT,
        env=subprocess_env(db),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stderr == ""
    assert "\x1b" not in run.stdout and run.stdout.startswith("default: added 1, ")
