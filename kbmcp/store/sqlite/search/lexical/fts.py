"""The keyword channel in SQL: FTS5 bm25 over title, heading path and body, inside the scope.

The plain path's lexical source for the ranking statement (ranking.py), the index's statistics
(FTS5's averages record) and its tokenizer (query terms -> tokens); the column weights, the
tokenizer's definition and the stop-word rule are both backends' (kbmcp/search/lexical/channel.py).
The accelerated sources (postings.py, scan.py) reproduce this channel's scores bit for bit
(tests/test_search_bm25.py).

Two facts shape the SQL (both measured, see docs/search.md):

- The scope is written `+rowid IN (SELECT id FROM scope_chunk)`. Without the unary `+`, FTS5
  takes the rowid constraint as its own and runs one full MATCH per allowed id (29 s instead of
  26 ms for a common term and 10k ids). With it, FTS5 walks the term doclists once and SQLite
  drops rows outside the scope before bm25 is computed and before ORDER BY / LIMIT.
- An OR-query over common terms is FTS5's slow case: bm25 runs for every row that contains any
  term. Common single-token terms are dropped (channel.py's stop-word rule); the fallback to
  every term, when the pruned query finds no more chunks than the candidate depth, is inside
  the same statement (its LIMIT is 0 otherwise, which SQLite checks before the query's loop
  starts).
  Measured at 100k chunks: unscoped lexical p50 137 ms -> 73 ms with recall@10 1.000; lower
  cut-offs were faster but changed results (20% -> recall 0.835), so they are not used.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import apsw

from kbmcp.search.lexical import channel
from kbmcp.search.lexical.bm25 import IndexStats
from kbmcp.search.query_text import match_expression
from kbmcp.store.sqlite.search.ranking import ChannelSource
from kbmcp.store.tokenizer import query_tokens

# bm25() is "lower is better"; the channel reports its negation so that higher is better.
# {in_scope} is IN_SCOPE for a scoped search and empty when every indexed chunk is in scope.
SEARCH = """
    SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body) AS score
    FROM chunk_fts
    WHERE chunk_fts MATCH :lexical_match {in_scope}
    ORDER BY score DESC, rowid
    LIMIT :depth + 1"""
IN_SCOPE = "AND +rowid IN (SELECT id FROM scope_chunk)"

# With common terms left out (see the module docstring): the pruned query first, and the query
# with every term only when the pruned one found no more than :depth chunks.
PRUNED_CTE = """lexical_pruned(chunk_id, score) AS MATERIALIZED ({search}),
"""
PRUNED_OR_ALL = """
    SELECT chunk_id, score FROM lexical_pruned
    WHERE (SELECT count(*) FROM lexical_pruned) > :depth
    UNION ALL
    SELECT * FROM (
        SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body) AS score
        FROM chunk_fts
        WHERE chunk_fts MATCH :lexical_match_all {in_scope}
        ORDER BY score DESC, rowid
        -- LIMIT 0 ends the query before its loop starts; a constant WHERE term would be tested
        -- per row, after FTS5 has walked every term's doclist (+25-45 ms unscoped at 100k).
        LIMIT CASE WHEN (SELECT count(*) FROM lexical_pruned) > :depth THEN 0
                   ELSE :depth + 1 END)"""

# FTS5_AVERAGES_ROWID: the record with the row count and per-column token totals.
SELECT_AVERAGES = "SELECT block FROM chunk_fts_data WHERE id = 1"

# fts5vocab over the index (temp: per connection, so no migration): document frequency per term.
CREATE_VOCAB = """
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_fts_vocab USING fts5vocab(main, chunk_fts, row)
"""
TERM_DOC_FREQUENCIES = """
SELECT term, doc FROM temp.chunk_fts_vocab WHERE term IN (SELECT value FROM json_each(:terms))
"""


def fts_source(
    conn: apsw.Connection, terms: list[str], scope_rows: int | None, depth: int
) -> ChannelSource:
    """The lexical channel as FTS5 SQL over the scope (`scope_rows` None: the whole index)."""
    in_scope = "" if scope_rows is None else IN_SCOPE
    match = match_expression(terms)
    if match is None:  # no word characters at all: nothing can match
        return ChannelSource("fts5")
    params = {
        "lexical_match": match,
        "w_title": channel.TITLE_WEIGHT,
        "w_heading": channel.HEADING_WEIGHT,
        "w_body": channel.BODY_WEIGHT,
    }
    kept, dropped = drop_stopwords(conn, terms, scope_rows, depth)
    pruned = match_expression(kept) if dropped else None
    if pruned is None:
        return ChannelSource("fts5", SEARCH.format(in_scope=in_scope), params)
    return ChannelSource(
        "fts5",
        PRUNED_OR_ALL.format(in_scope=in_scope),
        {**params, "lexical_match": pruned, "lexical_match_all": match},
        ctes=PRUNED_CTE.format(search=SEARCH.format(in_scope=in_scope)),
    )


# (single-token terms) -> rows of the whole index containing each, keyed by term.
CountTerms = Callable[[list[str]], dict[str, int]]


def drop_stopwords(
    conn: apsw.Connection,
    terms: list[str],
    scope_rows: int | None,
    depth: int,
    count: CountTerms | None = None,
) -> tuple[list[str], list[str]]:
    """Split terms into (kept, dropped) by `channel.common_terms`, with the whole index's
    frequencies (the caller reads every store: stats.py), when `channel.prunes` says that a
    search of a scope of `scope_rows` chunks (None: the whole index) prunes at all. `count`:
    where the frequencies come from (a server's accelerator keeps them); by default fts5vocab."""
    if len(terms) < 2:  # before reading N: a one-term query never prunes
        return terms, []
    # N from FTS5's averages record (one row), not count(*) over docsize (~20-30 ms at 100k
    # chunks in a fresh process, where the b-tree is not in the page cache yet).
    total = index_stats(conn).rows
    if not channel.prunes(len(terms), total, scope_rows, depth):
        return terms, []
    tokens = {term: list(query_tokens(term)) for term in terms}
    singles = [term for term, ts in tokens.items() if len(ts) == 1]
    frequency = (count or (lambda found: _vocabulary_counts(conn, found, tokens)))(singles)
    return channel.common_terms(terms, tokens, frequency, total)


def _vocabulary_counts(
    conn: apsw.Connection, terms: list[str], tokens: dict[str, list[str]]
) -> dict[str, int]:
    """Rows containing each single-token term, from fts5vocab."""
    ensure_vocabulary(conn)
    wanted = sorted({tokens[term][0] for term in terms})
    rows = conn.execute(TERM_DOC_FREQUENCIES, {"terms": _json_list(wanted)}).fetchall()
    frequencies = dict(rows)
    return {term: frequencies.get(tokens[term][0], 0) for term in terms}


def index_stats(conn: apsw.Connection) -> IndexStats:
    """N and the total tokens of the whole index, from FTS5's averages record (row id 1 of
    `chunk_fts_data`: varint N, then one varint per column)."""
    row = conn.execute(SELECT_AVERAGES).fetchone()
    if row is None or not row[0]:
        return IndexStats(0, 0)
    values = decode_varints(row[0])
    return IndexStats(rows=values[0], total_tokens=sum(values[1:]))


def decode_varints(blob: bytes) -> list[int]:
    """A run of SQLite varints (as FTS5 writes them in its averages and docsize records)."""
    values: list[int] = []
    value, length = 0, 0
    for byte in blob:
        length += 1
        if length == 9:  # the 9th byte carries 8 bits
            values.append((value << 8) | byte)
            value, length = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            values.append((value << 7) | byte)
            value, length = 0, 0
    return values


def ensure_vocabulary(conn: apsw.Connection) -> None:
    conn.execute(CREATE_VOCAB)


def _json_list(values: list[str]) -> str:
    return json.dumps(values)
