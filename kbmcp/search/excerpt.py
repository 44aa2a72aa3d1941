"""A bounded excerpt of a chunk around its best match.

The window (about EXCERPT_CHARS characters) is placed where the most distinct query terms occur
close together, matching terms the way the index does (FTS5's porter tokenizer, so "running"
finds "runs"). Without a match (a purely semantic hit) it is the chunk's start. The window is
widened to word boundaries and marked with "…" where text was cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

EXCERPT_CHARS = 300
ELLIPSIS = "…"

# (utf-8 text) -> [(byte start, byte end, token), ...]: the index tokenizer.
Tokenize = Callable[[bytes], Sequence[tuple[int, int, str]]]


def make_excerpt(
    text: str, query_tokens: set[str], tokenize: Tokenize, size: int = EXCERPT_CHARS
) -> str:
    if len(text) <= size:
        return text
    start = _best_window_start(text, query_tokens, tokenize, size)
    end = min(len(text), start + size)
    start, end = _to_word_boundaries(text, start, end)
    body = text[start:end].strip()
    return (ELLIPSIS if start > 0 else "") + body + (ELLIPSIS if end < len(text) else "")


def _best_window_start(text: str, query_tokens: set[str], tokenize: Tokenize, size: int) -> int:
    matches = _matches(text, query_tokens, tokenize)
    if not matches:
        return 0
    best_start, best_count = matches[0][0], 0
    for i, (position, _) in enumerate(matches):
        distinct = {token for pos, token in matches[i:] if pos < position + size}
        if len(distinct) > best_count:
            best_start, best_count = position, len(distinct)
    # Start a little before the first match so it reads in context.
    lead = min(size // 5, best_start)
    return max(0, min(best_start - lead, len(text) - size))


def _matches(text: str, query_tokens: set[str], tokenize: Tokenize) -> list[tuple[int, str]]:
    """(character offset, token) of each query token in `text`."""
    if not query_tokens:
        return []
    data = text.encode("utf-8")
    found = []
    for start, _end, token, *_ in tokenize(data):
        if token in query_tokens:
            found.append((len(data[:start].decode("utf-8", errors="ignore")), token))
    return found


def _to_word_boundaries(text: str, start: int, end: int) -> tuple[int, int]:
    """Move `start` back and `end` forward (at most a few characters) so no word is cut; if the
    word is too long, cut inside it instead."""
    slack = 20
    s = start
    while s > 0 and start - s < slack and not text[s - 1].isspace():
        s -= 1
    if s > 0 and not text[s - 1].isspace():
        s = start
    e = end
    while e < len(text) and e - end < slack and not text[e].isspace():
        e += 1
    if e < len(text) and not text[e].isspace():
        e = end
    return s, e
