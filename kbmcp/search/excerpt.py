"""A bounded excerpt of a chunk around its best match.

The window (about EXCERPT_CHARS characters) is placed where the most distinct query terms occur
close together, matching terms the way the index does (FTS5's porter tokenizer, so "running"
finds "runs"; search/matches.py). Without a match (a purely semantic hit) it is the chunk's
start. The window is widened to word boundaries and marked with "…" where text was cut.

`make_excerpts` is what a search runs: the excerpts of all its results at once, the matches
found without tokenising whole texts (or, in a long-lived process, from the tokens it kept of
texts it returned before: search/text_tokens.py) and every window scored with numpy.
`make_excerpt` is the reference it equals (tests/test_search_fast_paths.py): tokenise the text,
try every window. On 100 SciFact abstracts (~1,500 characters) the reference takes ~7 ms of
CPU, `make_excerpts` ~2.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kbmcp.search.matches import (
    FoundMatches,
    Matches,
    QueryMatches,
    Tokenize,
    reference_matches,
)
from kbmcp.search.text_tokens import TenantTextTokens

EXCERPT_CHARS = 300
ELLIPSIS = "…"
# The most (match, token) cells `best_window_starts` holds at once (int64: 16 MB).
WINDOW_GRID_ELEMENTS = 2_000_000
_NO_OCCURRENCE = np.iinfo(np.int64).max


def make_excerpts(
    texts: Sequence[str],
    query_tokens: set[str],
    tokenize: Tokenize,
    size: int = EXCERPT_CHARS,
    kept: TenantTextTokens | None = None,
) -> list[str]:
    """The excerpt of each text, equal to `make_excerpt`'s. `kept`: a long-lived process's
    tokens of the texts it returned (search/text_tokens.py), else the matches are found anew."""
    long = [i for i, text in enumerate(texts) if len(text) > size]
    cut = [texts[i] for i in long]
    if kept is not None:
        found = kept.found(cut, query_tokens, tokenize)
    else:
        found = QueryMatches(query_tokens, tokenize).found(cut)
    best = best_window_starts(found, [len(text) for text in cut], size)
    excerpts = list(texts)
    for i, text, start in zip(long, cut, best, strict=True):
        excerpts[i] = _cut(text, 0 if start is None else _with_lead(text, start, size), size)
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


def best_window_starts(found: FoundMatches, lengths: Sequence[int], size: int) -> list[int | None]:
    """Per text, the offset of its first match with the most distinct tokens in [match, match +
    size) (None: no match), for every text at once. The texts are laid end to end with `size`
    between them (a match's key), so no window reaches into the next text. A match's count is,
    over the tokens, whether the token's next occurrence at or after the match lies inside its
    window: a grid of (match, token) holding each match's key in its token's column, its
    running minimum from the end down each column is every token's next occurrence for every
    match at once (a few numpy passes, where a loop over tokens made ~6 calls a token: SciFact,
    100 results, 0.94-1.22 -> 0.48-0.58 ms). Keys are distinct: a text has one token at an
    offset (the tokenizer's first; colocated tokens are not matches), so "at or after a match"
    is "at its row or below"."""
    best: list[int | None] = [None] * len(lengths)
    count = len(found.texts)
    if count == 0:
        return best
    stride = max(lengths) + size
    key = found.texts * stride + found.offsets  # ascending
    ends = (key + size)[:, None]
    distinct = np.zeros(count, dtype=np.int64)
    # Columns a grid at a time, so that a long query over long texts stays within
    # WINDOW_GRID_ELEMENTS (at most ~16 MB).
    step = max(1, WINDOW_GRID_ELEMENTS // count)
    for first in range(0, len(found.vocabulary), step):
        width = min(step, len(found.vocabulary) - first)
        here = np.flatnonzero((found.tokens >= first) & (found.tokens < first + width))
        grid = np.full((count, width), _NO_OCCURRENCE, dtype=np.int64)
        grid[here, found.tokens[here] - first] = key[here]
        following = np.minimum.accumulate(grid[::-1], axis=0)[::-1]
        distinct += np.count_nonzero(following < ends, axis=1)
    # Per text, the most distinct tokens first, then the earliest offset.
    order = np.lexsort((key, -distinct, found.texts))
    texts = found.texts[order]
    first_of_text = np.flatnonzero(np.r_[True, texts[1:] != texts[:-1]])
    for text, offset in zip(texts[first_of_text].tolist(),
                            found.offsets[order][first_of_text].tolist(), strict=True):  # fmt: skip
        best[text] = offset
    return best


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
