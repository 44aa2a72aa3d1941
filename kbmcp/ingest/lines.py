"""Lines of a document with exact offsets, and the sections a parser collects from them.

Shared by the section parsers (sections.py) and the chunker (chunker.py). Line breaks are
``\\n``, ``\\r\\n`` (one break) and a lone ``\\r``; offsets are Python string indices.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

# --------------------------------------------------------------------------------------------
# Lines


_BREAK = re.compile(r"\r\n|\r|\n")
_NON_SPACE = re.compile(r"\S")


class Lines:
    """The line table of a content string.

    ``starts[i]`` / ``ends[i]`` delimit line ``i`` (0-based) without its line break; ``texts[i]``
    is its text, used only to classify lines (a byte order mark is removed from the first one).
    A content ending with a line break has a last, empty line.
    """

    __slots__ = ("content", "ends", "starts", "texts")

    def __init__(self, content: str) -> None:
        self.content = content
        self.texts: list[str] = _BREAK.split(content)
        self.starts: list[int] = [0]
        self.ends: list[int] = []
        if "\r" in content:
            for match in _BREAK.finditer(content):
                self.ends.append(match.start())
                self.starts.append(match.end())
        else:
            position = 0
            for text in self.texts[:-1]:
                position += len(text)
                self.ends.append(position)
                position += 1
                self.starts.append(position)
        self.ends.append(len(content))
        # A leading byte-order mark is not text: the first line starts after it, so no chunk
        # (and no heading) ever holds it, whatever else the file contains.
        bom = len(self.texts[0]) - len(self.texts[0].lstrip("\ufeff"))
        if bom:
            self.texts[0] = self.texts[0][bom:]
            self.starts[0] = bom

    def __len__(self) -> int:
        return len(self.texts)

    def number_at(self, position: int) -> int:
        """1-based number of the line holding the character at ``position``."""
        return bisect_right(self.starts, position)

    def span(self, first: int, stop: int) -> tuple[int, int] | None:
        """Char range of lines ``first..stop-1`` without surrounding whitespace; None if blank."""
        start, end = self.starts[first], self.ends[stop - 1]
        match = _NON_SPACE.search(self.content, start, end)
        if match is None:
            return None
        start = match.start()
        return start, start + len(self.content[start:end].rstrip())


def is_blank(text: str) -> bool:
    return not text or text.isspace()


# --------------------------------------------------------------------------------------------
# Sections


@dataclass
class Section:
    heading_path: tuple[str, ...]
    level: int  # 0 for the part before the first heading
    title: str
    first_line: int  # the heading's first line (0-based)
    blocks: list[tuple[int, int]] = field(default_factory=list)  # line ranges [first, stop)


class Sections:
    """Collects sections and their blocks while tracking the heading path."""

    def __init__(self) -> None:
        self.sections: list[Section] = [Section((), 0, "", 0)]
        self._open: list[tuple[int, str]] = []  # (level, title) of the enclosing headings

    def add_block(self, first: int, stop: int) -> None:
        self.sections[-1].blocks.append((first, stop))

    def open(self, level: int, title: str, first: int, stop: int) -> None:
        """Start a section whose heading occupies lines ``first..stop-1``."""
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, title))
        path = tuple(name for _, name in self._open)
        self.sections.append(Section(path, level, title, first, [(first, stop)]))
