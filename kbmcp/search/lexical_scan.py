"""The keyword channel for small scopes: bm25 computed in Python over the allowed rows only.

Why: FTS5 answers `MATCH '"a" OR "b" ...' AND +rowid IN carray(:allowed)` by walking every
term's whole doclist and testing each row against the allow-list, so a 100-chunk scope costs
as much as the doclists of its query terms (a 13-term question: 20-40 ms at 100k chunks), not
as much as its 100 chunks. Here the allowed chunks' text is tokenised with the index's own
tokenizer and scored with FTS5's formula (kbmcp/search/bm25.py); from the index only the
statistics are read: N and the column totals (averages record), per-row column sizes (docsize),
and each term's document frequency (fts5vocab; an FTS5 count for multi-token phrases).

Exactness guard: the text is re-tokenised from the chunk, revision and document rows; if any
row's per-column token counts differ from what FTS5 recorded for it in docsize, the index was
built from other text and the caller falls back to FTS5 (returns None).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

import apsw
import numpy as np

from kbmcp.search import bm25
from kbmcp.search.query_text import quote_term
from kbmcp.store.index import heading_text

# The text of each allowed chunk exactly as it was indexed (store/index.py: title, heading path
# joined with " > ", body), with FTS5's recorded column sizes for the same row.
SELECT_INDEXED_TEXT = """
SELECT c.id, d.title, c.heading_path, c.text, s.sz
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
JOIN chunk_fts_docsize AS s ON s.id = c.id
WHERE c.id IN carray(:ids)
ORDER BY c.id
"""
# Rows containing a term (fts5vocab 'row': one b-tree probe per term).
TERM_ROWS = """
SELECT term, doc FROM temp.chunk_fts_vocab WHERE term IN (SELECT value FROM json_each(:terms))
"""
# Rows containing a multi-token phrase: what FTS5's own bm25 asks (xQueryPhrase) for its idf.
PHRASE_ROWS = "SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH :phrase"


# A query phrase: the user's term and its index tokens (several for e.g. `sqlite-vec`, `what's`).
Phrase = tuple[str, tuple[str, ...]]


def scan_scope(
    conn: apsw.Connection,
    phrases: Sequence[Phrase],
    allowed: np.ndarray,
    weights: Sequence[float],
    tokenize: apsw.FTS5Tokenizer,
    known_counts: dict[str, int] | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(chunk ids, scores) of every allowed row that contains at least one phrase, scored like
    `-bm25(chunk_fts, *weights)`, in id order; None when the stored text does not match the
    index (or a phrase has no tokens), so the caller must ask FTS5. `known_counts` (quoted
    phrase -> rows containing it) is used and filled: counting a common term's rows walks its
    whole doclist (~3-5 ms for a word in every chunk at 100k), so callers keep it while the
    file is unchanged (term_cache.TermCache.row_counts)."""
    if any(not tokens for _, tokens in phrases):
        return None
    stats = bm25.index_stats(conn)
    rows = conn.execute(SELECT_INDEXED_TEXT, {"ids": apsw.carray(allowed)}).fetchall()
    if len(rows) != len(allowed):
        return None  # an allowed chunk without a docsize row: not what FTS5 indexed
    if not phrases or not rows or stats.rows == 0:
        return _empty_ids(), np.zeros(0)
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    frequency = np.zeros((len(phrases), len(rows)), dtype=np.float64)
    doc_length = np.zeros(len(rows), dtype=np.int64)
    for j, (_, title, heading, body, sizes) in enumerate(rows):
        columns = (title, heading_text(json.loads(heading)), body)
        recorded = bm25.decode_varints(sizes)
        for column, (text, weight) in enumerate(zip(columns, weights, strict=True)):
            tokens = [t[2] for t in tokenize(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT,
                                             None)]  # fmt: skip
            if len(tokens) != recorded[column]:
                return None  # the index holds other text for this row
            doc_length[j] += len(tokens)
            counts = Counter(tokens)
            for i, (_, phrase) in enumerate(phrases):
                n = counts.get(phrase[0], 0)
                if n and len(phrase) > 1:
                    n = _phrase_count(tokens, phrase)
                for _ in range(n):  # one weight per instance, added up like FTS5 does
                    frequency[i, j] += weight
    containing = _rows_containing(conn, phrases, {} if known_counts is None else known_counts)
    score = np.zeros(len(rows), dtype=np.float64)
    for i, (term, _) in enumerate(phrases):  # in query order, as FTS5 sums them
        idf = bm25.idf(stats.rows, containing[term])
        score += bm25.contributions(idf, frequency[i], doc_length, stats.avgdl)
    hit = (frequency > 0).any(axis=0)
    return ids[hit], score[hit]


def _phrase_count(tokens: list[str], phrase: tuple[str, ...]) -> int:
    """Occurrences of the phrase as consecutive tokens of one column (FTS5 phrase semantics)."""
    n = len(phrase)
    first = phrase[0]
    return sum(
        1
        for i in range(len(tokens) - n + 1)
        if tokens[i] == first and tuple(tokens[i : i + n]) == phrase
    )


def _rows_containing(
    conn: apsw.Connection, phrases: Sequence[Phrase], known: dict[str, int]
) -> dict[str, int]:
    """Indexed rows containing each phrase (keyed by term): the n of the idf."""
    missing = [(term, tokens) for term, tokens in phrases if quote_term(term) not in known]
    singles = sorted({tokens[0] for _, tokens in missing if len(tokens) == 1})
    found = (
        dict(conn.execute(TERM_ROWS, {"terms": json.dumps(singles)}).fetchall()) if singles else {}
    )
    for term, tokens in missing:
        if len(tokens) == 1:
            known[quote_term(term)] = int(found.get(tokens[0], 0))
        else:
            match = quote_term(term)
            known[match] = int(conn.execute(PHRASE_ROWS, {"phrase": match}).fetchone()[0])
    return {term: known[quote_term(term)] for term, _ in phrases}


def _empty_ids() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)
