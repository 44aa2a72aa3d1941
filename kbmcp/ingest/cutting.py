"""Packing a section's blocks into chunks of at most ``max_chars``, and cutting blocks that are
too large (used by chunker.py)."""

from __future__ import annotations

import re
import unicodedata

_NON_SPACE = re.compile(r"\S")
_SPACE = re.compile(r"\s")


def pack_blocks(
    content: str, blocks: list[tuple[int, int]], max_chars: int, overlap: int
) -> list[tuple[int, int]]:
    """Pack consecutive blocks (stripped char ranges of one section) into chunk ranges.

    A block that fits in the pending chunk joins it; one that fits alone starts a new chunk; one
    that is too large even alone is cut together with the pending chunk (so a heading stays with
    the start of the text under it), and the last piece of the cut becomes the pending chunk.
    """
    spans: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None
    for start, end in blocks:
        if pending is not None and end - pending[0] <= max_chars:
            pending = (pending[0], end)
        elif end - start <= max_chars:
            if pending is not None:
                spans.append(pending)
            pending = (start, end)
        else:
            first = pending[0] if pending is not None else start
            pieces = _cut(content, first, end, max_chars, overlap)
            spans.extend(pieces[:-1])
            pending = pieces[-1]
    if pending is not None:
        spans.append(pending)
    return spans


def _cut(content: str, start: int, end: int, max_chars: int, overlap: int) -> list[tuple[int, int]]:
    """Cut ``content[start:end]`` (stripped) into overlapping pieces of at most ``max_chars``.

    Each piece ends at the last line break that fits, else at the last whitespace, else hard at
    ``max_chars``. The next piece starts about ``overlap`` characters before that cut (snapped to
    a line break or whitespace), but always goes past the previous piece: ``must`` is the first
    non-whitespace character after the previous cut, and every new piece contains it.
    """
    pieces: list[tuple[int, int]] = []
    position = must = start
    while end - position > max_chars:
        limit = position + max_chars
        cut, kind = _find_cut(content, max(position, must) + 1, limit, end, max_chars)
        pieces.append((position, position + len(content[position:cut].rstrip())))
        must = _next_non_space(content, cut, end)
        position = _next_non_space(
            content, _overlap_start(content, position, cut, kind, overlap), end
        )
        if must - position >= max_chars:
            position = must
    pieces.append((position, end))
    return pieces


def _next_non_space(content: str, position: int, end: int) -> int:
    match = _NON_SPACE.search(content, position, end)
    assert match is not None, "a stripped range ends with a non-whitespace character"
    return match.start()


def _find_cut(content: str, low: int, limit: int, end: int, max_chars: int) -> tuple[int, str]:
    """Where to end a piece: an index in ``[low, limit]`` and how it was found.

    The last line break wins, unless the line after it is too long for any chunk: that line must
    be cut anyway, so the piece is filled up to its last whitespace (or hard) instead of ending
    early, which keeps e.g. a heading with the start of a long one-line paragraph.
    """
    index = max(content.rfind("\n", low, limit + 1), content.rfind("\r", low, limit + 1))
    if index >= 0 and not _long_line_after(content, index, end, max_chars):
        return index, "line"
    low = max(low, index + 1)
    space = _last_space(content, low, limit + 1)
    if space >= 0:
        return space, "space"
    return _hard_cut(content, low, limit), "hard"


def _long_line_after(content: str, index: int, end: int, width: int) -> bool:
    """Whether the line after the line break at ``index`` (and before ``end``) is longer than
    ``width``."""
    start = index + 2 if content.startswith("\r\n", index) else index + 1
    stop = min(end, start + width + 1)
    return (
        stop - start > width
        and content.find("\n", start, stop) < 0
        and content.find("\r", start, stop) < 0
    )


def _last_space(content: str, low: int, high: int) -> int:
    """Index of the last whitespace in ``content[low:high]`` (-1 if none); spaces and tabs are
    looked up first, other Unicode whitespace only when there are none."""
    index = max(content.rfind(" ", low, high), content.rfind("\t", low, high))
    if index < 0:
        for match in _SPACE.finditer(content, low, high):
            index = match.start()
    return index


def _hard_cut(content: str, low: int, limit: int) -> int:
    """``limit``, moved back (not below ``low``) so as not to separate a character from the
    combining marks, variation selectors, joiners or skin-tone modifiers that extend it."""
    cut = limit
    while cut > low and _extends_previous(content, cut):
        cut -= 1
    return cut


def _extends_previous(content: str, index: int) -> bool:
    char = content[index]
    return (
        unicodedata.category(char) in ("Mn", "Mc", "Me")
        or char == "\u200d"
        or content[index - 1] == "\u200d"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
    )


def _overlap_start(content: str, position: int, cut: int, kind: str, overlap: int) -> int:
    """Where the piece after ``content[position:cut]`` starts so as to repeat about ``overlap``
    characters: after a line cut, at the first line break in the last ``overlap`` characters;
    after a whitespace or hard cut, at the first whitespace there. Without such a boundary, hard
    cuts overlap mid-word and the others do not overlap."""
    target = max(cut - overlap, position + 1)
    if target >= cut:
        return cut
    if kind == "line":
        breaks = [
            i for i in (content.find("\n", target, cut), content.find("\r", target, cut)) if i >= 0
        ]
        return min(breaks, default=cut)
    match = _SPACE.search(content, target, cut)
    if match is not None:
        return match.start()
    return target if kind == "hard" else cut
