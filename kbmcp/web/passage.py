"""The reader's window: which part of a revision to show, and the cited passage marked in it.

A search result cites a passage by character range in its revision (`citation.char_start`,
`char_end`: 0-based, end exclusive). The reader reads a window of at most `WINDOW` characters
(the service's largest read) that holds the passage with some text before it, starting at a
line where it can, and splits the window into the text before the passage, the passage, and
the text after it, which the template prints (escaped) around a <mark>.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbmcp.search.models import MAX_LIMIT_CHARS

WINDOW = MAX_LIMIT_CHARS
# Characters shown before a marked passage, so that it is read in its context.
LEAD = 1500


@dataclass(frozen=True)
class Passage:
    start: int
    end: int


@dataclass(frozen=True)
class MarkedWindow:
    offset: int  # of `before`'s first character in the revision
    before: str
    passage: str
    after: str
    # Lines of the revision the passage spans (1-based), None without a passage in the window.
    line_start: int | None
    line_end: int | None


def window_offset(passage: Passage | None, offset: int | None) -> int:
    """Where the window starts: `offset` when given (a section of the outline, the next part),
    else some text before the passage, else the start."""
    if offset is not None:
        return offset
    if passage is None:
        return 0
    start = max(0, passage.start - LEAD)
    if passage.end - start > WINDOW:  # a long passage: as much of it as fits, from its start
        start = passage.start
    return start


def mark(
    content: str, offset: int, first_line: int, passage: Passage | None, *, to_line_start: bool
) -> MarkedWindow:
    """The window `content` (starting at `offset`, on line `first_line` of the revision) split
    around `passage`; with `to_line_start`, a partial first line before the passage is left
    out, so the window starts at a line."""
    if passage is None or passage.end <= offset or passage.start >= offset + len(content):
        return MarkedWindow(offset, content, "", "", None, None)
    low = max(passage.start - offset, 0)
    high = min(passage.end - offset, len(content))
    if to_line_start and offset > 0:
        cut = content.find("\n", 0, low)
        if cut >= 0:
            first_line += _line_breaks(content[: cut + 1])
            content, offset = content[cut + 1 :], offset + cut + 1
            low, high = low - cut - 1, high - cut - 1
    before, marked = content[:low], content[low:high]
    line_start = first_line + _line_breaks(before)
    line_end = line_start + _line_breaks(marked.rstrip("\r\n"))
    return MarkedWindow(offset, before, marked, content[high:], line_start, line_end)


def _line_breaks(text: str) -> int:
    """Line breaks in `text`, counted as the chunker counts them (so as citations do): \\r\\n,
    \\r and \\n are one each."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")
