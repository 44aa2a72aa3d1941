"""A bounded excerpt of a chunk around its best match.

The window (about EXCERPT_CHARS characters) is placed where the most distinct query terms occur
close together, matching terms the way the index does (FTS5's porter tokenizer, so "running"
finds "runs"; search/matches.py). Without a match (a purely semantic hit) it is the chunk's
start. The window is widened to word boundaries and marked with "…" where text was cut.

`make_excerpts` is what a search runs: the excerpts of its results at once, the matches found
without tokenising whole texts, the window in one pass. `make_excerpt` is the reference it equals
(tests/test_search_fast_paths.py): tokenise the text, try every window. On SciFact abstracts
(~1,500 characters) the reference took ~75 us of CPU a result, `make_excerpts` ~35.
"""

from __future__ import annotations

from collections.abc import Sequence

from kbmcp.search.matches import Matches, QueryMatches, Tokenize, reference_matches

EXCERPT_CHARS = 300
ELLIPSIS = "…"


def make_excerpts(
    texts: Sequence[str], query_tokens: set[str], tokenize: Tokenize, size: int = EXCERPT_CHARS
) -> list[str]:
    """The excerpt of each text, equal to `make_excerpt`'s."""
    long = [i for i, text in enumerate(texts) if len(text) > size]
    found = QueryMatches(query_tokens, tokenize).of([texts[i] for i in long])
    excerpts = list(texts)
    for i, matches in zip(long, found, strict=True):
        excerpts[i] = _cut(texts[i], _best_window_start(texts[i], matches, size), size)
    return excerpts


def make_excerpt(
    text: str, query_tokens: set[str], tokenize: Tokenize, size: int = EXCERPT_CHARS
) -> str:
    """The reference: one text, tokenised whole, every window tried."""
    if len(text) <= size:
        return text
    matches = reference_matches(text, query_tokens, tokenize)
    return _cut(text, _reference_window_start(text, matches, size), size)


def _reference_window_start(text: str, matches: Matches, size: int) -> int:
    if not matches:
        return 0
    best_start, best_count = matches[0][0], 0
    for i, (position, _) in enumerate(matches):
        distinct = {token for pos, token in matches[i:] if pos < position + size}
        if len(distinct) > best_count:
            best_start, best_count = position, len(distinct)
    return _with_lead(text, best_start, size)


def _best_window_start(text: str, matches: Matches, size: int) -> int:
    """`_reference_window_start` in one pass: the window [match, match + size) slides right,
    counting each token's matches inside it; the first window with the most distinct tokens
    wins, and the pass ends at a window that holds every token that occurs."""
    if not matches:
        return 0
    occurring = len({token for _, token in matches})
    best_start, best_count = matches[0][0], 0
    inside: dict[str, int] = {}
    right = 0
    for position, token in matches:
        while right < len(matches) and matches[right][0] < position + size:
            entering = matches[right][1]
            inside[entering] = inside.get(entering, 0) + 1
            right += 1
        if len(inside) > best_count:
            best_start, best_count = position, len(inside)
            if best_count == occurring:
                break
        if inside[token] == 1:
            del inside[token]
        else:
            inside[token] -= 1
    return _with_lead(text, best_start, size)


def _with_lead(text: str, best_start: int, size: int) -> int:
    # Start a little before the first match so it reads in context.
    lead = min(size // 5, best_start)
    return max(0, min(best_start - lead, len(text) - size))


def _cut(text: str, start: int, size: int) -> str:
    end = min(len(text), start + size)
    start, end = _to_word_boundaries(text, start, end)
    body = text[start:end].strip()
    return (ELLIPSIS if start > 0 else "") + body + (ELLIPSIS if end < len(text) else "")


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
