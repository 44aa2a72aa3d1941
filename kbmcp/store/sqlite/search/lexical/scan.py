"""Accelerator: the keyword channel for small scopes, bm25 computed over the allowed rows only.

Why: FTS5 answers `MATCH '"a" OR "b" ...' AND +rowid IN carray(:allowed)` by walking every
term's whole doclist and testing each row against the allow-list, so a 100-chunk scope costs
as much as the doclists of its query terms (a 13-term question: 20-40 ms at 100k chunks), not
as much as its 100 chunks. Here the allowed chunks' text is tokenised with the index's own
tokenizer and scored with FTS5's formula (bm25.py); from the index only the
statistics are read: N and the column totals (averages record), per-row column sizes (docsize),
and each term's document frequency (fts5vocab; an FTS5 count for multi-token phrases), or the
same statistics of the caller's readable set when it cannot read every store (stats.py).

Exactness guard: the text is re-tokenised from the chunk, revision and document rows; if any
row's per-column token counts differ from what FTS5 recorded for it in docsize, the index was
built from other text and the caller falls back to FTS5 (returns None).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw
import numpy as np

from kbmcp.search.lexical import bm25
from kbmcp.search.query_text import quote_term
from kbmcp.store.index import heading_text
from kbmcp.store.sqlite.search.lexical import fts
from kbmcp.store.sqlite.search.lexical.stats import ReadableRows
from kbmcp.store.sqlite.search.lexical.tokens import (
    COLUMNS,
    ChunkTokens,
    GatheredTokens,
    TokenCache,
)

# The text of each allowed chunk exactly as it was indexed (store/index.py: title, heading path
# joined with " > ", body), with FTS5's recorded column sizes for the same row.
SELECT_INDEXED_TEXT = """
SELECT c.id, d.id, d.title, c.heading_path, c.text, s.sz
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
    cache: TokenCache,
    known_counts: dict[str, int] | None = None,
    readable: ReadableRows | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(chunk ids, scores) of every allowed row that contains at least one phrase, scored like
    `-bm25(chunk_fts, *weights)`, in id order; None when the stored text does not match the
    index (or a phrase has no tokens), so the caller must ask FTS5. The statistics are the
    whole index's, or those of `readable` (stats.py; `allowed` lies inside it).
    `known_counts` (quoted phrase -> rows of the index containing it) is used and filled:
    counting a common term's rows walks its whole doclist (~3-5 ms for a word in every chunk
    at 100k), so callers keep it while the file is unchanged
    (postings.PostingsIndex.row_counts); a readable set keeps its own. Tokenised chunks are
    kept in `cache`."""
    if any(not tokens for _, tokens in phrases) or not exact_weights(weights):
        return None
    stats = fts.index_stats(conn) if readable is None else readable.stats
    if not phrases or len(allowed) == 0 or stats.rows == 0:
        return _empty_ids(), np.zeros(0)
    found = phrase_frequencies(conn, phrases, allowed, weights, tokenize, cache)
    if found is None:
        return None  # the index holds other text for some row
    frequency, doc_length = found
    if readable is None:
        known = {} if known_counts is None else known_counts
        containing = rows_containing(conn, phrases, known)
    else:
        containing = readable.containing(conn, [term for term, _ in phrases])
    score = np.zeros(len(allowed), dtype=np.float64)
    for i, (term, _) in enumerate(phrases):  # in query order, as FTS5 sums them
        idf = bm25.idf(stats.rows, containing[term])
        score += bm25.contributions(idf, frequency[i], doc_length, stats.avgdl)
    hit = (frequency > 0).any(axis=0)
    return allowed[hit], score[hit]


def phrase_frequencies(
    conn: apsw.Connection,
    phrases: Sequence[Phrase],
    chunk_ids: np.ndarray,
    weights: Sequence[float],
    tokenize: apsw.FTS5Tokenizer,
    cache: TokenCache,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(frequency, doc_length): each phrase's column-weighted instance count in each chunk
    (phrases x chunks, float64, FTS5's f) and each chunk's token count over all columns (FTS5's
    D), from the chunks' text as indexed; None if some chunk's text differs from the index."""
    ids = chunk_ids.tolist()
    gathered = cache.gather(ids)  # every chunk already tokenised: a few numpy calls
    if gathered is None:
        # Those already held are taken before tokenising the rest: adding to a full cache may
        # drop them.
        held = {i: chunk for i in ids if (chunk := cache.get(i)) is not None}
        missing = np.asarray([i for i in ids if i not in held], dtype=np.int64)
        tokenised = _tokenise(conn, cache, missing, tokenize)
        if tokenised is None:
            return None
        gathered = _joined([held.get(i) or tokenised[i] for i in ids])
    token_ids, lengths = gathered.token_ids, gathered.lengths
    # The text (row * 3 + column) of every token, as FTS5 counts per column of each row.
    text_of = np.repeat(np.arange(len(ids), dtype=np.int64) * COLUMNS, lengths) + gathered.columns
    doc_length = gathered.sizes.sum(axis=1)
    texts = len(ids) * COLUMNS
    code_of = {token: code for code, token in enumerate({t for _, p in phrases for t in p})}
    codes = np.full(len(token_ids), -1, dtype=np.int32)
    for token, code in code_of.items():
        vocabulary_id = cache.vocabulary.get(token)
        if vocabulary_id is not None:
            codes[token_ids == vocabulary_id] = code
    hits = np.flatnonzero(codes >= 0)  # the tokens of any phrase: few among all
    frequency = np.zeros((len(phrases), len(ids)), dtype=np.float64)
    for i, (_, phrase) in enumerate(phrases):
        found = _phrase_starts(codes, text_of, [code_of[t] for t in phrase], hits)
        counts = np.bincount(text_of[found], minlength=texts).reshape(len(ids), COLUMNS)
        # FTS5 adds one column weight per instance, in column order; with weights that are
        # multiples of 1/1024 (checked) these sums are exact, so count * weight is the same.
        for column, weight in enumerate(weights):
            frequency[i] += counts[:, column] * weight
    return frequency, doc_length


def _tokenise(
    conn: apsw.Connection, cache: TokenCache, chunk_ids: np.ndarray, tokenize: apsw.FTS5Tokenizer
) -> dict[int, ChunkTokens] | None:
    """Tokenise the chunks as indexed and add them to the cache; None if a chunk has no docsize
    row or its token counts differ from FTS5's (the index was built from other text)."""
    rows = conn.execute(SELECT_INDEXED_TEXT, {"ids": apsw.carray(chunk_ids)}).fetchall()
    if len(rows) != len(chunk_ids):
        return None  # a chunk without a docsize row: not what FTS5 indexed
    # One tokenizer call for every column of every row: the texts joined by newlines (a
    # separator for unicode61, so no token spans two texts), each token assigned to its
    # text (row * 3 + column) by byte offset.
    texts = [
        text.encode("utf-8")
        for _, _, title, heading, body, _ in rows
        for text in (title, heading_text(json.loads(heading)) if heading != "[]" else "", body)
    ]
    lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
    text_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    tokens = tokenize(b"\n".join(texts), apsw.FTS5_TOKENIZE_DOCUMENT, None)
    starts = np.fromiter((t[0] for t in tokens), dtype=np.int64, count=len(tokens))
    text_of = np.searchsorted(text_starts, starts, side="right") - 1
    sizes = np.bincount(text_of, minlength=len(texts)).reshape(len(rows), COLUMNS)
    recorded = np.array([fts.decode_varints(row[5])[:COLUMNS] for row in rows])
    if recorded.shape != sizes.shape or not np.array_equal(sizes, recorded):
        return None
    token_ids = cache.token_ids([t[2] for t in tokens])
    bounds = np.searchsorted(text_of // COLUMNS, np.arange(len(rows) + 1))
    found = {}
    for row, (chunk_id, document_id, *_) in enumerate(rows):
        start, stop = bounds[row], bounds[row + 1]
        chunk = ChunkTokens(
            token_ids[start:stop].copy(),
            (text_of[start:stop] % COLUMNS).astype(np.int8),
            sizes[row].astype(np.int64),
        )
        cache.add(chunk_id, document_id, chunk)
        found[chunk_id] = chunk
    return found


def _joined(chunks: list[ChunkTokens]) -> GatheredTokens:
    """`TokenCache.gather`'s result for chunks at hand (some just tokenised)."""
    if not chunks:
        return GatheredTokens(
            np.zeros(0, np.int32), np.zeros(0, np.int8), np.zeros(0, np.int64),
            np.zeros((0, COLUMNS), np.int64),
        )  # fmt: skip
    return GatheredTokens(
        np.concatenate([c.token_ids for c in chunks]),
        np.concatenate([c.columns for c in chunks]),
        np.fromiter((len(c.token_ids) for c in chunks), dtype=np.int64, count=len(chunks)),
        np.stack([c.sizes for c in chunks]),
    )


def _phrase_starts(
    codes: np.ndarray, text_of: np.ndarray, phrase: list[int], hits: np.ndarray
) -> np.ndarray:
    """Token indexes where the phrase starts: its tokens consecutive within one text (FTS5
    phrase semantics; a one-token phrase is every instance of the token). `hits`: the indexes
    of every token that is in some phrase (codes >= 0), ascending: only those can start one,
    so each phrase costs per hit, not per token of the scope."""
    n = len(phrase)
    starts = hits[codes[hits] == phrase[0]]
    starts = starts[starts <= len(codes) - n]
    for k in range(1, n):
        following = starts + k
        starts = starts[(codes[following] == phrase[k]) & (text_of[following] == text_of[starts])]
    return starts


def exact_weights(weights: Sequence[float]) -> bool:
    """Weights whose instance sums are exact in float64 (multiples of 1/1024)."""
    return len(weights) == COLUMNS and all(float(w * 1024).is_integer() for w in weights)


def rows_containing(
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
