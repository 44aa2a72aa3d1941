"""The keyword channel's yardstick in hybrid fusion: what the query's bm25 can be expected to reach.

The ceiling is the sum of FTS5's idf over the query's phrases, which is exactly the bm25 of a
chunk of average length that holds every phrase once (bm25.py: with f = 1 and D = avgdl the
frequency factor f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl)) is 1). Hybrid fusion
(search/ranking.py) cuts the keyword channel's weight in proportion when its best chunk scores
below a share of it: a best match on one common word of a question whose telling words occur
nowhere is weak evidence, and min-max normalisation alone would give it the channel's full
weight.

A phrase that occurs in no chunk counts with FTS5's idf for n = 0: the query asked for it and
the keyword channel found nothing, which is what makes a lone hit on another word weak.

The statistics (N, each phrase's n) are the ones the channel's scores are computed with, on
every path: the index's, or the caller's readable set's (stats.py). So the ceiling, like the
scores, is identical on the plain and accelerated paths and depends on nothing the caller
cannot read.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from kbmcp.search.lexical import bm25
from kbmcp.store.sqlite.search.lexical import fts
from kbmcp.store.sqlite.search.lexical.scan import Phrase, rows_containing
from kbmcp.store.sqlite.search.lexical.stats import ReadableRows


def query_ceiling(
    conn: apsw.Connection,
    phrases: Sequence[Phrase],
    known_counts: dict[str, int],
    readable: ReadableRows | None = None,
) -> float:
    """The sum over `phrases` (in query order) of FTS5's idf; 0.0 for an empty index.
    `known_counts` (quoted phrase -> rows of the index containing it) is used and filled, as by
    scan.rows_containing. With `readable`, N and each n are those of the caller's readable set
    (stats.py), as the scores' are."""
    phrases = [(term, tokens) for term, tokens in phrases if tokens]
    index = fts.index_stats(conn)
    stats = index if readable is None else readable.stats
    if not phrases or stats.rows == 0:
        return 0.0
    if readable is not None and readable.own is not None:
        # A set that finds phrases in its own rows counts them there (own_tokens.py): no count
        # over the whole index, whose cost would follow other tenants' rows.
        counted = readable.containing(conn, [term for term, _ in phrases])
        if readable.own is not None:
            return sum(bm25.idf(stats.rows, counted[term]) for term, _ in phrases)
    containing = rows_containing(conn, phrases, known_counts)
    unreadable = index.rows - stats.rows
    ceiling = 0.0
    for term, _tokens in phrases:
        count = containing[term]
        if readable is not None:
            # A phrase in at least half the readable rows has its idf clamped whatever its
            # exact n: rows containing it are at least those of the index minus every row the
            # caller cannot read, so the commonest words need no count.
            if 2 * (count - unreadable) >= stats.rows:
                count = stats.rows
            else:
                count = readable.containing(conn, [term])[term]
        ceiling += bm25.idf(stats.rows, count)
    return ceiling
