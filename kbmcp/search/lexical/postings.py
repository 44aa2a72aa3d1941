"""Accelerator: an in-memory impact index for large scopes and unscoped keyword searches.

Why: FTS5's doclist walk is cheap (counting the 91k rows of a common term: ~3 ms at 100k
chunks) but its bm25 is not: it reads each matching row's sizes from docsize and scores it
(~0.5 us a row), for every row that contains any query term, on every query. A term's bm25
contribution to a row does not depend on the rest of the query: FTS5 sums one term per phrase,
in query order, and a phrase absent from a row adds exactly 0.0. So the cache keeps, per
phrase, the rows that contain it and FTS5's own contribution for each, obtained once from
`-bm25()` of a single-phrase query (bit-for-bit the term FTS5 adds inside the OR query). A
search then sums the cached arrays in query order with numpy: the same sums, the same floats,
the same ranking as the OR query, at a fraction of the cost once its terms are cached.

Freshness: every contribution depends on N, avgdl and the phrase's row count, so a change to the
index invalidates all of it: the owning accelerator (search/accelerator.py) replaces the index
when the file's index change log moves.

Memory: 12 bytes per cached (row, phrase) pair (int32 row position + float64 contribution);
at most MAX_POSTINGS pairs, least recently used phrases evicted first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import apsw
import numpy as np

MAX_POSTINGS = 8_000_000  # ~96 MB: every (row, term) pair of ~100k chunks of ~90 words

# Every indexed row (docsize has exactly one row per row of chunk_fts): position <-> rowid.
SELECT_INDEXED_ROWIDS = "SELECT id FROM chunk_fts_docsize ORDER BY id"
# FTS5's contribution of one phrase to every row containing it (bm25() is "lower is better").
PHRASE_CONTRIBUTIONS = """
SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body)
FROM chunk_fts
WHERE chunk_fts MATCH :phrase
"""


@dataclass
class Postings:
    positions: np.ndarray  # int32 positions into TermCache.rowids, ascending
    contributions: np.ndarray  # float64, FTS5's bm25 term for this phrase in each row


@dataclass
class PostingsIndex:
    weights: tuple[float, float, float]
    phrases: OrderedDict[str, Postings] = field(default_factory=OrderedDict)
    size: int = 0  # cached pairs
    # Rows containing each phrase (the n of its idf), also for phrases without cached postings.
    row_counts: dict[str, int] = field(default_factory=dict)
    _rowids: np.ndarray | None = None

    def rowids(self, conn: apsw.Connection) -> np.ndarray:
        """Every indexed row id (int64, sorted); postings hold positions into it."""
        if self._rowids is None:
            rows = conn.execute(SELECT_INDEXED_ROWIDS).fetchall()
            self._rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return self._rowids

    def postings(self, conn: apsw.Connection, phrase: str) -> Postings:
        cached = self.phrases.get(phrase)
        if cached is not None:
            self.phrases.move_to_end(phrase)
            return cached
        rows = conn.execute(
            PHRASE_CONTRIBUTIONS,
            {
                "phrase": phrase,
                "w_title": self.weights[0],
                "w_heading": self.weights[1],
                "w_body": self.weights[2],
            },
        ).fetchall()
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        contributions = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        order = np.argsort(rowids, kind="stable")
        found = Postings(
            np.searchsorted(self.rowids(conn), rowids[order]).astype(np.int32), contributions[order]
        )
        self.phrases[phrase] = found
        self.row_counts[phrase] = len(rowids)
        self.size += len(rowids)
        while self.size > MAX_POSTINGS and len(self.phrases) > 1:
            _, evicted = self.phrases.popitem(last=False)
            self.size -= len(evicted.positions)
        return found

    def score(
        self, conn: apsw.Connection, match_phrases: Sequence[str], allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(chunk ids, scores) of every allowed row containing at least one phrase, in id
        order, scored exactly like `-bm25(chunk_fts, *weights)` of the OR of `match_phrases`."""
        return _score(self, conn, match_phrases, allowed)


def _score(
    cache: PostingsIndex,
    conn: apsw.Connection,
    match_phrases: Sequence[str],
    allowed: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    rowids = cache.rowids(conn)
    total = len(rowids)
    mask = None
    if allowed is not None:
        mask = np.zeros(total, dtype=bool)
        positions = np.searchsorted(rowids, allowed)
        inside = positions < total
        positions = positions[inside]
        mask[positions[rowids[positions] == allowed[inside]]] = True
    score = np.zeros(total, dtype=np.float64)
    hit = np.zeros(total, dtype=bool)
    for phrase in match_phrases:  # in query order, as FTS5 sums them
        postings = cache.postings(conn, phrase)
        positions, contributions = postings.positions, postings.contributions
        if mask is not None:
            keep = mask[positions]
            positions, contributions = positions[keep], contributions[keep]
        score[positions] += contributions
        hit[positions] = True
    found = np.flatnonzero(hit)
    return rowids[found], score[found]
