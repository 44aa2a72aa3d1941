"""The keyword channel from FTS5 for a caller who cannot read every store (no accelerators).

FTS5's `bm25()` takes N, the average length and each phrase's n from the whole index, so it
cannot score with the statistics of a smaller readable set (stats.py). This source asks FTS5
for what only it knows fast, which rows contain a phrase and how often, and recomputes bm25:

1. the readable set's N and total tokens (its rows' docsize records) and each term's n inside
   it (stats.py);
2. stop-word pruning as in fts.py, by the same rule (`common_terms`) on those frequencies, with
   the same fallback to every term when the pruned terms find no more rows than the depth. A
   word is surely common when even its whole-index n minus every row the caller cannot read
   is above the cut, so the commonest words are not counted at all (~40 ms each at 100k);
3. per phrase, FTS5's single-phrase `-bm25()` for each row of the scope that contains it,
   solved for f (its column-weighted instance count) with the index's own statistics, as the
   postings do (postings.py), and checked by recomputing it bit for bit; a row whose check
   fails gets f from its text tokenised like the scan does (scan.py);
4. each phrase's bm25 term from f, the row's D and the readable statistics, summed over the
   phrases in query order: the floats FTS5's bm25() of the OR query would give if the
   readable set were the whole index. When it is (the caller reads every store), this equals
   fts.py's SQL bit for bit (tests/test_search_keyword_stats.py).

Its strategy is still "fts5": the same index, only the statistics differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np

from kbmcp.search.lexical import bm25, channel
from kbmcp.search.query_text import quote_term
from kbmcp.store.sqlite.search.lexical import fts
from kbmcp.store.sqlite.search.lexical.scan import Phrase, phrase_frequencies, rows_containing
from kbmcp.store.sqlite.search.lexical.stats import ReadableRows
from kbmcp.store.sqlite.search.lexical.tokens import TokenCache
from kbmcp.store.sqlite.search.ranking import ChannelSource, bound
from kbmcp.store.sqlite.search.sorted_ids import positions_of
from kbmcp.store.sqlite.search.top_k import top_k
from kbmcp.store.tokenizer import index_tokenizer, query_tokens

# FTS5's bm25 term of one phrase for each row that contains it: every row (a short doclist,
# filtered in numpy), or the rows of a set (`+rowid`: see fts.py; the carray's ephemeral index
# costs ~15 ms per 100k ids, cheaper than scoring a long doclist in full).
PHRASE_CONTRIBUTIONS = """
SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body)
FROM chunk_fts
WHERE chunk_fts MATCH :phrase
"""
PHRASE_CONTRIBUTIONS_IN_SET = """
SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body)
FROM chunk_fts
WHERE chunk_fts MATCH :phrase AND +rowid IN (SELECT value FROM carray(:ids))
ORDER BY rowid
"""


def readable_fts_source(
    conn: apsw.Connection,
    terms: list[str],
    allowed: np.ndarray,
    readable: ReadableRows,
    depth: int,
) -> ChannelSource:
    """The lexical channel over `allowed` (ascending chunk ids, all in `readable`), scored with
    the readable set's statistics."""
    if not terms:
        return ChannelSource("fts5")
    ids, scores = _scores(conn, terms, allowed, readable, depth)
    best_ids, best_scores, _ = top_k(ids, scores, depth + 1)
    return bound("lexical_candidates", "fts5", best_ids, best_scores)


def _scores(
    conn: apsw.Connection,
    terms: list[str],
    allowed: np.ndarray,
    readable: ReadableRows,
    depth: int,
) -> tuple[np.ndarray, np.ndarray]:
    stats = readable.stats
    if stats.rows == 0 or len(allowed) == 0:
        return allowed[:0], np.zeros(0)
    tokenize = index_tokenizer()
    phrases: list[Phrase] = [(term, query_tokens(term)) for term in terms]
    scorer = _PhraseScorer(conn, allowed, readable, phrases, tokenize)
    if channel.prunes(len(terms), stats.rows, len(allowed), depth):
        singles = {term: scorer.frequency(term) for term, tokens in phrases if len(tokens) == 1}
        kept, dropped = channel.common_terms(terms, dict(phrases), singles, stats.rows)
        if dropped:
            score, hit = _sum(scorer, kept, len(allowed))
            if np.count_nonzero(hit) > depth:
                return allowed[hit], score[hit]
    score, hit = _sum(scorer, terms, len(allowed))
    return allowed[hit], score[hit]


def _sum(scorer: _PhraseScorer, terms: Sequence[str], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the allowed rows over `terms`, summed in query order as FTS5 does (a phrase
    absent from a row adds exactly 0.0 there, so skipping it gives the same float)."""
    score = np.zeros(size, dtype=np.float64)
    hit = np.zeros(size, dtype=bool)
    for term in terms:
        positions, contributions = scorer.contributions(term)
        score[positions] += contributions
        hit[positions] = True
    return score, hit


class _PhraseScorer:
    """Each phrase's n and bm25 terms for the allowed rows, computed once per request."""

    def __init__(
        self,
        conn: apsw.Connection,
        allowed: np.ndarray,
        readable: ReadableRows,
        phrases: list[Phrase],
        tokenize: apsw.FTS5Tokenizer,
    ) -> None:
        self.conn = conn
        self.allowed = allowed
        self.readable = readable
        self.phrases = phrases
        self.tokens = dict(phrases)
        self.tokenize = tokenize
        self.lengths = readable.lengths_of(conn, allowed)  # D of each allowed row
        self.index = fts.index_stats(conn)
        # n in the whole index (fts5vocab, or a count for phrases): for solving f, and bounds.
        self.index_counts = rows_containing(conn, phrases, {})
        self.done: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def frequency(self, term: str) -> int:
        """n of a single-token term in the readable set for the stop-word rule, or a lower
        bound of it that is already above the rule's cut (the rule then decides the same)."""
        unreadable = self.index.rows - self.readable.stats.rows
        at_least = self.index_counts[term] - unreadable
        if at_least > channel.STOPWORD_DOC_FRACTION * self.readable.stats.rows:
            return at_least
        return self.count(term)

    def count(self, term: str) -> int:
        return self.readable.containing(self.conn, [term])[term]

    def contributions(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `allowed`, bm25 terms) of the allowed rows containing the phrase."""
        if term not in self.done:
            self.done[term] = self._compute(term)
        return self.done[term]

    def _compute(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        params = {"phrase": quote_term(term), "w_title": channel.WEIGHTS[0],
                  "w_heading": channel.WEIGHTS[1], "w_body": channel.WEIGHTS[2]}  # fmt: skip
        if self.index_counts[term] <= len(self.allowed):  # read the doclist, keep the allowed
            rows = self.conn.execute(PHRASE_CONTRIBUTIONS, params).fetchall()
        else:
            params["ids"] = apsw.carray(self.allowed)
            rows = self.conn.execute(PHRASE_CONTRIBUTIONS_IN_SET, params).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        found = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        positions = positions_of(self.allowed, ids)
        inside = positions >= 0
        ids, found, positions = ids[inside], found[inside], positions[inside]
        lengths = self.lengths[positions]
        frequency = self._frequency(term, ids, found, lengths)
        stats = self.readable.stats
        idf = bm25.idf(stats.rows, self.count(term))
        return positions, bm25.contributions(idf, frequency, lengths, stats.avgdl)

    def _frequency(
        self, term: str, ids: np.ndarray, found: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """f of each row from FTS5's bm25 term under the index's own statistics."""
        if len(ids) == 0:
            return np.zeros(0)
        idf = bm25.idf(self.index.rows, self.index_counts[term])
        frequency = bm25.solve_frequency(found, idf, lengths, self.index.avgdl)
        wrong = bm25.contributions(idf, frequency, lengths, self.index.avgdl) != found
        if wrong.any():  # not with the engine's grid weights; stay exact regardless
            phrase = (term, self.tokens[term])
            counted = phrase_frequencies(
                self.conn, [phrase], ids[wrong], channel.WEIGHTS, self.tokenize, TokenCache()
            )
            if counted is not None:  # else the index holds other text: keep the solved f
                frequency[wrong] = counted[0][0]
        return frequency
