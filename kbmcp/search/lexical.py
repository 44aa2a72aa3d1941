"""The keyword channel: FTS5 bm25 over title, heading path and body, inside the scope.

Three engines give FTS5's bm25 ranking, bit for bit (tests/test_search_bm25.py): the per-term
impact cache (term_cache.py), a Python scan of small scopes (lexical_scan.py), and FTS5's own
OR query (below), chosen by `_engine` from measured costs. The notes below are about the last.

Two facts shape the SQL (both measured, see docs/search.md and stack-facts.md):

- The allow-list is written `+rowid IN carray(:allowed)`. Without the unary `+`, FTS5 takes the
  rowid constraint as its own and runs one full MATCH per allowed id (29 s instead of 26 ms for a
  common term and 10k ids). With it, FTS5 walks the term doclists once and SQLite drops rows
  outside the scope before bm25 is computed and before ORDER BY / LIMIT: scope before limit.
- An OR-query over common terms is FTS5's slow case: bm25 runs for every row that contains any
  term. Terms that occur in more than half of the indexed chunks are dropped as long as a rarer
  term that occurs remains. This does not change the ranking: FTS5's bm25 idf,
  log((N - n + 0.5) / (n + 0.5)), is negative for n > N/2 and FTS5 clamps it to 1e-6, so such a
  term adds at most ~1e-6 to any score. The only other effect, losing chunks that contain
  nothing but such terms, is undone by searching again with every term whenever the pruned
  query finds no more chunks than the candidate depth (typical for small scopes).
  Measured at 100k chunks (bench/search.py, 20 queries of 8-15 words, a loaded 2-core
  machine): unscoped lexical p50 137 ms -> 73 ms with recall@10 1.000.
  Lower cut-offs were faster but changed results: 20% -> 47 ms at recall 0.835, 10% -> 25 ms at
  0.590, 5% -> 20 ms at 0.500, so they are not used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import apsw
import numpy as np

from kbmcp.search.lexical_scan import rows_containing, scan_scope
from kbmcp.search.query_text import match_expression, quote_term
from kbmcp.search.term_cache import score_cached, term_cache
from kbmcp.search.top_k import top_k

# bm25 column weights (title, heading, body). Equal, by measurement (bench/tune_scifact.py,
# docs/retrieval-quality.md): on SciFact, where a document's title is also its heading, lexical
# nDCG@10 is 0.685 with (1, 1, 1), 0.676 with (2, 1.5, 1) and 0.671 with (10, 0, 1); weighting
# titles up only helps documents whose body never repeats the title, and the body of a chunk
# under a heading usually does. (0, 0, 1) scores 0.680: the title and heading columns still help.
TITLE_WEIGHT = 1.0
HEADING_WEIGHT = 1.0
BODY_WEIGHT = 1.0
WEIGHTS = (TITLE_WEIGHT, HEADING_WEIGHT, BODY_WEIGHT)

# Which engine scores a query (each gives FTS5's bm25 ranking, see the module docstring):
USE_TERM_CACHE = True  # the per-term impact cache (term_cache.py), when its terms are cached
# Scopes up to SCAN_MAX_ROWS chunks whose query terms are not all cached are scored in Python
# from their text (lexical_scan.py) when that is cheaper than filling the cache. Measured at
# 100k chunks: the scan costs ~30 us per allowed chunk (100: 3.1 ms, 1000: 36 ms); filling the
# cache ~1 us per row containing the uncached term (a word in half the chunks: ~50 ms); the
# warm cache ~1 ms for any scope up to 3000 chunks.
SCAN_MAX_ROWS = 2000
SCAN_COST_IN_POSTINGS = 30  # one scanned chunk costs about as much as 30 fetched postings

STOPWORD_DOC_FRACTION = 0.5  # above this, FTS5's bm25 idf is clamped to ~0 (see above)
STOPWORD_MIN_ROWS = 1000  # smaller indexes are cheap to search with every term
TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])  # as in 002_search_index.sql

# bm25() is "lower is better"; the channel reports its negation so that higher is better.
SEARCH = """
SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body) AS score
FROM chunk_fts
WHERE chunk_fts MATCH :match {allowed}
ORDER BY score DESC, rowid
LIMIT :limit
"""
ALLOWED = "AND +rowid IN carray(:allowed)"

# fts5vocab over the index (temp: per connection, so no migration): document frequency per term.
CREATE_VOCAB = """
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_fts_vocab USING fts5vocab(main, chunk_fts, row)
"""
TERM_DOC_FREQUENCIES = """
SELECT term, doc FROM temp.chunk_fts_vocab WHERE term IN (SELECT value FROM json_each(:terms))
"""
# The docsize table has one row per indexed chunk; counting it reads only its b-tree.
INDEXED_ROWS = "SELECT count(*) FROM chunk_fts_docsize"


@dataclass(frozen=True)
class LexicalHits:
    chunk_ids: list[int]
    scores: list[float]
    terms: list[str]  # the terms searched for
    dropped_terms: list[str]  # common terms left out (see STOPWORD_DOC_FRACTION)
    more: bool  # the channel had more hits than the depth it returned


def search_lexical(
    conn: apsw.Connection,
    terms: list[str],
    allowed: np.ndarray | None,
    depth: int,
    use_cache: bool = True,
) -> LexicalHits:
    """`use_cache=False` (a one-shot process): the impact cache is used only when it already
    holds every term; otherwise the scan (small scopes) or FTS5, which need no fill."""
    if allowed is not None and len(allowed) == 0:
        return LexicalHits([], [], terms, [], False)
    engine = _engine(conn, terms, allowed, use_cache)
    if engine == "scan":
        assert allowed is not None
        tokenizer = conn.fts5_tokenizer(TOKENIZER[0], TOKENIZER[1])
        phrases = [(term, tuple(_tokens(tokenizer, term))) for term in terms]
        counts = term_cache(conn, WEIGHTS).row_counts
        scanned = scan_scope(conn, phrases, allowed, WEIGHTS, tokenizer, counts)
        if scanned is not None:
            return _ranked(*scanned, terms, depth)
    elif engine == "cache":
        return _ranked(*score_cached(conn, [quote_term(t) for t in terms], allowed, WEIGHTS),
                       terms, depth)  # fmt: skip
    if allowed is not None and len(allowed) <= depth:
        # The pruned query could never find more than `depth` chunks here, so it would always
        # be re-run (below): search with every term straight away.
        return _search(conn, terms, [], allowed, depth)
    kept, dropped = drop_stopwords(conn, terms, STOPWORD_MIN_ROWS)
    hits = _search(conn, kept, dropped, allowed, depth)
    if dropped and not hits.more:
        # Fewer than depth+1 chunks in scope contain a kept term, so chunks that contain only
        # dropped terms would have filled the list: search again with every term.
        hits = _search(conn, terms, [], allowed, depth)
    return hits


def _engine(
    conn: apsw.Connection, terms: list[str], allowed: np.ndarray | None, use_cache: bool
) -> str:
    """ "scan" (Python bm25 over a small scope), "cache" (the impact cache) or "fts5"."""
    if not terms:
        return "fts5"
    small = allowed is not None and len(allowed) <= SCAN_MAX_ROWS
    if not USE_TERM_CACHE:
        return "scan" if small else "fts5"
    cache = term_cache(conn, WEIGHTS)
    uncached = [term for term in terms if quote_term(term) not in cache.phrases]
    if not uncached:
        return "cache"
    if not use_cache:
        return "scan" if small else "fts5"
    if not small:
        return "cache"
    assert allowed is not None
    tokenizer = conn.fts5_tokenizer(TOKENIZER[0], TOKENIZER[1])
    phrases = [(term, tuple(_tokens(tokenizer, term))) for term in uncached]
    if any(not tokens for _, tokens in phrases):
        return "fts5"
    to_fetch = sum(rows_containing(conn, phrases, cache.row_counts).values())
    return "cache" if to_fetch < SCAN_COST_IN_POSTINGS * len(allowed) else "scan"


def _ranked(ids: np.ndarray, scores: np.ndarray, terms: list[str], depth: int) -> LexicalHits:
    """The `depth` best by score, ties by chunk id (the SQL's ORDER BY score DESC, rowid)."""
    best_ids, best_scores, more = top_k(ids, scores, depth)
    return LexicalHits(
        chunk_ids=best_ids.tolist(),
        scores=best_scores.tolist(),
        terms=terms,
        dropped_terms=[],
        more=more,
    )


def _search(
    conn: apsw.Connection,
    terms: list[str],
    dropped: list[str],
    allowed: np.ndarray | None,
    depth: int,
) -> LexicalHits:
    match = match_expression(terms)
    if match is None:
        return LexicalHits([], [], terms, dropped, False)
    params: dict[str, object] = {
        "match": match,
        "w_title": TITLE_WEIGHT,
        "w_heading": HEADING_WEIGHT,
        "w_body": BODY_WEIGHT,
        "limit": depth + 1,
    }
    if allowed is not None:
        params["allowed"] = apsw.carray(allowed)
    sql = SEARCH.format(allowed=ALLOWED if allowed is not None else "")
    rows = conn.execute(sql, params).fetchall()[: depth + 1]
    hits = rows[:depth]
    return LexicalHits(
        chunk_ids=[row[0] for row in hits],
        scores=[float(row[1]) for row in hits],
        terms=terms,
        dropped_terms=dropped,
        more=len(rows) > depth,
    )


def drop_stopwords(
    conn: apsw.Connection, terms: list[str], min_rows: int
) -> tuple[list[str], list[str]]:
    """Split terms into (kept, dropped): a term is dropped when its rarest token occurs in more
    than STOPWORD_DOC_FRACTION of the indexed chunks, unless no rarer term that occurs at all
    would remain. Indexes of fewer than `min_rows` chunks are too small to bother (and to trust
    the frequencies)."""
    if len(terms) < 2:
        return terms, []
    ensure_vocabulary(conn)
    tokens = {term: term_tokens(conn, term) for term in terms}
    wanted = sorted({token for ts in tokens.values() for token in ts})
    frequencies = dict(conn.execute(TERM_DOC_FREQUENCIES, {"terms": _json_list(wanted)}).fetchall())
    total = conn.execute(INDEXED_ROWS).fetchone()[0]
    if total < min_rows:
        return terms, []
    ceiling = STOPWORD_DOC_FRACTION * total
    # A phrase matches at most as many chunks as its rarest token.
    frequency = {
        term: min((frequencies.get(t, 0) for t in ts), default=0) for term, ts in tokens.items()
    }
    common = {term for term, df in frequency.items() if df > ceiling}
    if not any(0 < df <= ceiling for df in frequency.values()):
        return terms, []
    return [t for t in terms if t not in common], [t for t in terms if t in common]


def document_tokenizer(conn: apsw.Connection) -> Callable[[bytes], list[tuple[int, int, str]]]:
    """The index's tokenizer as a function of UTF-8 text -> (byte start, byte end, token)."""
    tokenizer = conn.fts5_tokenizer(TOKENIZER[0], TOKENIZER[1])
    return lambda data: tokenizer(data, apsw.FTS5_TOKENIZE_DOCUMENT, None)


def term_tokens(conn: apsw.Connection, term: str) -> list[str]:
    """The index tokens of a term (stemmed, case- and diacritic-folded) as FTS5 sees them."""
    return _tokens(conn.fts5_tokenizer(TOKENIZER[0], TOKENIZER[1]), term)


def _tokens(tokenizer: apsw.FTS5Tokenizer, term: str) -> list[str]:
    return [token for _, _, token, *_ in tokenizer(term.encode("utf-8"),
                                                     apsw.FTS5_TOKENIZE_QUERY, None)]  # fmt: skip


def ensure_vocabulary(conn: apsw.Connection) -> None:
    conn.execute(CREATE_VOCAB)


def _json_list(values: list[str]) -> str:
    return json.dumps(values)
