"""The keyword index on PostgreSQL: FTS5's tokens, postings and statistics, and its bm25 in SQL.

SQLite's keyword channel is FTS5's `bm25()` over title, heading path and body
(kbmcp/store/sqlite/search/lexical/fts.py, kbmcp/search/lexical/bm25.py). PostgreSQL's
`ts_rank` is not bm25, so this backend keeps the inputs of FTS5's formula itself and computes
the same floats:

- Text is tokenised in Python with the tokenizer FTS5 uses (porter over unicode61 with
  remove_diacritics 2, from apsw: `channel.TOKENIZER`), column by column exactly as
  kbmcp/store/sqlite/index.py feeds FTS5: title, heading path joined with " > ", body.
- `chunk_keyword` holds each indexed chunk's token count per column (FTS5's docsize: D is the
  sum); `chunk_term` one row per (token, chunk) with its instances per column (f is their
  column-weighted sum), positions `column << 20 | offset` (a phrase is its tokens at
  consecutive offsets of one column) and an impact (`impact`: the order of a token's postings,
  best first); `keyword_total` each store's rows and tokens, `keyword_token` each store's rows
  containing each token.
- The statistics are those of the caller's readable set (docs/search.md, "Keyword statistics"):
  N and the total tokens from `keyword_total` of the readable stores, each token's n from
  `keyword_token` of those stores, a multi-token phrase's n from their postings. idf, the
  stop-word rule and hybrid's ceiling are then computed in Python with the functions SQLite's
  paths use, and the per-row terms in SQL with the same IEEE operations in the same order
  (bm25.contributions), summed in query order (an ordered `sum()`: PostgreSQL adds float8 left
  to right, as FTS5 does), so the scores are FTS5's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg

from kbmcp.search.lexical import bm25
from kbmcp.search.lexical.channel import WEIGHTS, common_terms, prunes
from kbmcp.store.index import heading_text

# The index's tokenizer, shared with the SQLite backend; the PostgreSQL modules use it through
# this one (keyword.query_tokens, keyword.tokenize_document).
from kbmcp.store.tokenizer import query_tokens as query_tokens
from kbmcp.store.tokenizer import tokenize_document as tokenize_document

COLUMNS = ("title", "heading", "body")
POSITION_SHIFT = 20  # position = column << 20 | offset: a column holds < 2^20 tokens
MAX_OFFSET = (1 << POSITION_SHIFT) - 1

INSERT_CHUNK_KEYWORD = """
COPY chunk_keyword (chunk_id, knowledge_base_id, title_tokens, heading_tokens, body_tokens)
FROM STDIN
"""
INSERT_CHUNK_TERMS = """
COPY chunk_term (token, knowledge_base_id, chunk_id, length, in_title, in_heading, in_body,
                 impact, positions)
FROM STDIN
"""
# chunk_term rows go with their chunk_keyword row (ON DELETE CASCADE).
DELETE_CHUNK_KEYWORD = "DELETE FROM chunk_keyword WHERE chunk_id = ANY(%(chunk_ids)s)"

# N and the total tokens of some stores' indexed chunks.
STORE_TOTALS = """
SELECT coalesce(sum(rows), 0)::bigint, coalesce(sum(tokens), 0)::bigint
FROM keyword_total
WHERE knowledge_base_id = ANY(%(stores)s)
"""
# Rows of some stores containing each token: the per-store counts the triggers keep
# (sql/003_keyword_scale.sql), one row per (token, store).
TOKEN_ROWS = """
SELECT token, sum(rows)::bigint
FROM keyword_token
WHERE token = ANY(%(tokens)s::text[]) AND knowledge_base_id = ANY(%(stores)s)
GROUP BY token
"""
# Every store's indexed rows and tokens (KeywordBatches).
ALL_STORE_LENGTHS = "SELECT knowledge_base_id, rows, tokens FROM keyword_total"
# Each store's average indexed length, for the impact of new postings.
STORE_LENGTHS = """
SELECT knowledge_base_id, rows, tokens FROM keyword_total WHERE knowledge_base_id = ANY(%(stores)s)
"""


# ------------------------------------------------------------------ tokens


def document_tokens(text: str) -> list[str]:
    """The tokens FTS5 indexes for a column's text, in order (kbmcp/store/tokenizer.py)."""
    if not text:
        return []
    return [token for _, _, token, *_ in tokenize_document(text.encode("utf-8"))]


class Posting(NamedTuple):
    token: str
    counts: tuple[int, int, int]  # instances in title, heading, body
    positions: tuple[int, ...]  # column << 20 | offset, ascending


@dataclass(frozen=True)
class ChunkKeywords:
    sizes: tuple[int, int, int]  # tokens in title, heading, body (FTS5's docsize)
    postings: list[Posting]

    @property
    def length(self) -> int:
        return sum(self.sizes)


def chunk_keywords(title: str, heading_path: Sequence[str], body: str) -> ChunkKeywords:
    """What FTS5 records for one chunk, as kbmcp/store/sqlite/index.py feeds it."""
    sizes, postings = _chunk_postings(title, heading_path, body)
    return ChunkKeywords(sizes, [Posting(t, c, tuple(p)) for t, c, p in postings])


# A chunk's sizes and postings (token, counts, positions) as plain tuples: what writing them
# needs, without a Posting per token (a copy makes millions).
_Postings = tuple[tuple[int, int, int], list[tuple[str, tuple[int, int, int], list[int]]]]


def _chunk_postings(title: str, heading_path: Sequence[str], body: str) -> _Postings:
    columns = (title, heading_text(heading_path), body)
    found: dict[str, tuple[list[int], list[int]]] = {}  # token -> (counts, positions)
    sizes = []
    for column, text in enumerate(columns):
        tokens = document_tokens(text)
        if len(tokens) > MAX_OFFSET:
            raise ValueError(f"a chunk's {COLUMNS[column]} has more than {MAX_OFFSET} tokens")
        sizes.append(len(tokens))
        base = column << POSITION_SHIFT
        for offset, token in enumerate(tokens):
            entry = found.get(token)
            if entry is None:
                found[token] = entry = ([0, 0, 0], [])
            entry[0][column] += 1
            entry[1].append(base | offset)
    postings = [(token, (c[0], c[1], c[2]), positions) for token, (c, positions) in found.items()]
    return (sizes[0], sizes[1], sizes[2]), postings


# ------------------------------------------------------------------ writes


@dataclass(frozen=True)
class KeywordRow:
    """One chunk to index: what kbmcp/store/sqlite/index.py's IndexRow gives FTS5, and its store."""

    knowledge_base_id: int
    chunk_id: int
    title: str
    heading_path: Sequence[str]
    text: str


def index_chunks(conn: psycopg.Connection[Any], rows: Sequence[KeywordRow]) -> None:
    """Add chunks to the keyword index (inside the caller's transaction)."""
    if not rows:
        return
    found = [_chunk_postings(row.title, row.heading_path, row.text) for row in rows]
    write_lines(conn, *copy_lines(rows, found, _average_lengths(conn, rows, found)))


def write_lines(conn: psycopg.Connection[Any], sizes: str, terms: str) -> None:
    """COPY the text of copy_lines into chunk_keyword and chunk_term."""
    with conn.cursor() as cur:
        with cur.copy(INSERT_CHUNK_KEYWORD) as copy:
            copy.write(sizes)
        with cur.copy(INSERT_CHUNK_TERMS) as copy:
            copy.write(terms)


class KeywordBatches:
    """The COPY text of many chunks' keyword rows, batch after batch, for one writer that holds
    the index (`kbmcp copy`): each store's totals are kept here from the first batch on, instead
    of read back from keyword_total after each batch is written, so a batch's rows can be made
    while the previous batch is still being written. The average lengths, hence the impacts,
    are the ones index_chunks would use for the same batches."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.totals = {
            store: [int(rows), int(tokens)]
            for store, rows, tokens in conn.execute(ALL_STORE_LENGTHS)
        }

    def lines(self, rows: Sequence[KeywordRow]) -> tuple[str, str]:
        found = [_chunk_postings(row.title, row.heading_path, row.text) for row in rows]
        _add_lengths(self.totals, rows, found)
        return copy_lines(rows, found, _averages(self.totals))


def copy_lines(
    rows: Sequence[KeywordRow], found: Sequence[_Postings], avgdl: dict[int, float]
) -> tuple[str, str]:
    """The COPY text of the rows' chunk_keyword and chunk_term rows. The inner loop runs once per
    posting (millions in a copy): `impact` is inlined with the same operations in the same order
    (the same floats), and a token is escaped only when it is not all letters and digits."""
    sizes: list[str] = []
    terms: list[str] = []
    k1, b, (w_title, w_heading, w_body) = bm25.K1, bm25.B, WEIGHTS
    for row, ((title_tokens, heading_tokens, body_tokens), postings) in zip(
        rows, found, strict=True
    ):
        store, chunk_id = row.knowledge_base_id, row.chunk_id
        length = title_tokens + heading_tokens + body_tokens
        sizes.append(f"{chunk_id}\t{store}\t{title_tokens}\t{heading_tokens}\t{body_tokens}\n")
        norm = k1 * ((1 - b) + b * length / avgdl[store])
        prefix = f"\t{store}\t{chunk_id}\t{length}\t"
        for token, (title, heading, body), positions in postings:
            f = title * w_title + heading * w_heading + body * w_body
            weight = (f * (k1 + 1.0)) / (f + norm)
            terms.append(
                f"{token if token.isalnum() else _copy_text(token)}{prefix}{title}\t{heading}\t"
                f"{body}\t{weight!r}\t{{{','.join(map(str, positions))}}}\n"
            )
    return "".join(sizes), "".join(terms)


def impact(title: int, heading: int, body: int, length: int, avgdl: float) -> float:
    """A posting's bm25 term-frequency part with its store's average length: the order of a
    token's postings, best first (chunk_term_by_impact); never a score."""
    f = title * WEIGHTS[0] + heading * WEIGHTS[1] + body * WEIGHTS[2]
    return (f * (bm25.K1 + 1.0)) / (f + bm25.K1 * ((1 - bm25.B) + bm25.B * length / avgdl))


def _average_lengths(
    conn: psycopg.Connection[Any], rows: Sequence[KeywordRow], found: Sequence[_Postings]
) -> dict[int, float]:
    """Each store's average indexed length once these rows are in (at least 1)."""
    totals: dict[int, list[int]] = {}
    _add_lengths(totals, rows, found)
    stores = sorted(totals)
    for store, held_rows, held_tokens in conn.execute(STORE_LENGTHS, {"stores": stores}):
        totals[store][0] += int(held_rows)
        totals[store][1] += int(held_tokens)
    return _averages(totals)


def _add_lengths(
    totals: dict[int, list[int]], rows: Sequence[KeywordRow], found: Sequence[_Postings]
) -> None:
    """Adds each row's chunk and its tokens to its store's [rows, tokens]."""
    for row, (sizes, _postings) in zip(rows, found, strict=True):
        total = totals.setdefault(row.knowledge_base_id, [0, 0])
        total[0] += 1
        total[1] += sum(sizes)


def _averages(totals: dict[int, list[int]]) -> dict[int, float]:
    """Each store's average indexed length (at least 1) from its [rows, tokens]."""
    return {store: max(tokens / count, 1.0) for store, (count, tokens) in totals.items()}


def unindex_chunks(conn: psycopg.Connection[Any], chunk_ids: Sequence[int]) -> None:
    if chunk_ids:
        conn.execute(DELETE_CHUNK_KEYWORD, {"chunk_ids": list(chunk_ids)})


def _copy_text(value: str) -> str:
    """A value in COPY's text format (tokens are letters and digits; escape regardless)."""
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


# ------------------------------------------------------------------ statistics

# A query phrase: the user's term and its index tokens (several for `sqlite-vec`, "a phrase").
Phrase = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class KeywordStats:
    """bm25's statistics over a readable set: N, the total tokens, each phrase's n."""

    rows: int
    total_tokens: int
    containing: dict[str, int]  # term -> rows containing it

    @property
    def avgdl(self) -> float:
        return bm25.IndexStats(self.rows, self.total_tokens).avgdl

    def idf(self, term: str) -> float:
        return bm25.idf(self.rows, self.containing[term])


def keyword_stats(
    conn: psycopg.Connection[Any], phrases: Sequence[Phrase], stores: Sequence[int]
) -> KeywordStats:
    """N and total tokens of these stores' indexed chunks, and the rows of them containing each
    phrase (a multi-token phrase: its tokens adjacent, in order, in one column)."""
    store_list = sorted(set(stores))
    rows, total = conn.execute(STORE_TOTALS, {"stores": store_list}).fetchone()
    singles = single_tokens(phrases)
    if singles and rows:
        found = dict(conn.execute(TOKEN_ROWS, {"tokens": singles, "stores": store_list}).fetchall())
    else:
        found = {}
    return stats_of(conn, phrases, store_list, (int(rows), int(total)), found)


def single_tokens(phrases: Sequence[Phrase]) -> list[str]:
    """The tokens of the single-token phrases, sorted (TOKEN_ROWS' :tokens)."""
    return sorted({tokens[0] for _, tokens in phrases if len(tokens) == 1})


def stats_of(
    conn: psycopg.Connection[Any],
    phrases: Sequence[Phrase],
    stores: Sequence[int],
    totals: tuple[int, int],
    found: dict[str, int],
) -> KeywordStats:
    """The statistics from the stores' totals (STORE_TOTALS: rows, tokens) and their rows
    containing each single token (TOKEN_ROWS, read by the caller, maybe as part of another
    statement); a multi-token phrase's rows are counted here."""
    rows, total = totals
    containing: dict[str, int] = {}
    for term, tokens in phrases:
        if not tokens or not rows:
            containing[term] = 0
        elif len(tokens) == 1:
            containing[term] = int(found.get(tokens[0], 0))
        else:
            sql, params = phrase_rows_sql(tokens, "stats")
            params["stores"] = list(stores)
            # Planned for its tokens (see channels.py: a generic plan knows no token's rows).
            count = f"SELECT count(*) FROM ({sql}) AS hit"
            containing[term] = int(conn.execute(count, params, prepare=False).fetchone()[0])
    return KeywordStats(rows, total, containing)


def prune(
    phrases: Sequence[Phrase], stats: KeywordStats, scope_rows: int | None, depth: int
) -> tuple[list[Phrase], list[Phrase]]:
    """(kept, dropped) phrases, as fts.py's pruning decides for a scope of `scope_rows` chunks
    (None: every indexed chunk of the file), when `prunes` says a search prunes at all."""
    if not prunes(len(phrases), stats.rows, scope_rows, depth):
        return list(phrases), []
    tokens = dict(phrases)
    terms = [term for term, _ in phrases]
    kept, dropped = common_terms(terms, tokens, stats.containing, stats.rows)
    return [p for p in phrases if p[0] in kept], [p for p in phrases if p[0] in dropped]


# ------------------------------------------------------------------ scoring SQL

# Rows of one phrase: (phrase number, chunk id, D, f). {rows} is the row filter: the readable
# stores (statistics) or the searched rows (scoring). Weights are parameters: f is FTS5's sum of
# one column weight per instance (exact for weights on the 1/1024 grid, as scan.py checks).
SINGLE_TOKEN_ROWS = """
    SELECT {number}::integer AS phrase, p1.chunk_id,{store} p1.length,
           (p1.in_title * %(w_title)s + p1.in_heading * %(w_heading)s
            + p1.in_body * %(w_body)s) AS f
    FROM chunk_term AS p1
    WHERE p1.token = %({token})s AND {rows}"""
# A multi-token phrase: chunks holding every token, then the instances of the first token whose
# followers sit at the next offsets of the same column (the offset is the low bits, so +k stays
# in the column while offsets are below 2^20).
PHRASE_ROWS = """
    SELECT {number}::integer AS phrase, p1.chunk_id,{store} p1.length, hit.f
    FROM chunk_term AS p1
{joins}
    CROSS JOIN LATERAL (
        SELECT sum(CASE start >> {shift} WHEN 0 THEN %(w_title)s WHEN 1 THEN %(w_heading)s
                   ELSE %(w_body)s END) AS f
        FROM unnest(p1.positions) AS start
        WHERE {adjacent}) AS hit
    WHERE p1.token = %({token})s AND {rows} AND hit.f IS NOT NULL"""
PHRASE_JOIN = """    JOIN chunk_term AS p{k}
      ON p{k}.token = %({token})s AND p{k}.knowledge_base_id = p1.knowledge_base_id
     AND p{k}.chunk_id = p1.chunk_id"""
ROWS_OF_STORES = "p1.knowledge_base_id = ANY(%(stores)s)"
ROWS_SEARCHED = "p1.knowledge_base_id = ANY(%(searched_stores)s)"
ROWS_IN_SCOPE = """p1.knowledge_base_id = ANY(%(searched_stores)s)
      AND (p1.chunk_id, p1.knowledge_base_id) IN (SELECT id, store FROM scope_chunk)"""
# The bounded plan's candidates (keyword_channel.py), already in the searched stores.
ROWS_OF_CANDIDATES = """p1.knowledge_base_id = ANY(%(searched_stores)s)
      AND (p1.chunk_id, p1.knowledge_base_id) IN (SELECT chunk_id, store FROM lexical_candidate)"""


def phrase_rows_sql(
    tokens: Sequence[str],
    rows: str,
    number: int = 0,
    prefix: str = "t",
    *,
    with_store: bool = False,
) -> tuple[str, dict[str, Any]]:
    """SQL yielding (phrase, chunk_id, length, f) for one phrase, and its token parameters
    (`with_store`: (phrase, chunk_id, store, length, f)). `rows`: "stats" (the stores' rows),
    "searched" (the searched stores), "scope" or "candidates" (the bounded plan's)."""
    row_filter = {"stats": ROWS_OF_STORES, "searched": ROWS_SEARCHED, "scope": ROWS_IN_SCOPE,
                  "candidates": ROWS_OF_CANDIDATES}[rows]  # fmt: skip
    store = " p1.knowledge_base_id AS store," if with_store else ""
    names = [f"{prefix}{number}_{k}" for k in range(len(tokens))]
    params: dict[str, Any] = dict(zip(names, tokens, strict=True))
    params.update(weight_params())
    if len(tokens) == 1:
        sql = SINGLE_TOKEN_ROWS.format(number=number, token=names[0], rows=row_filter, store=store)
        return sql, params
    joins = "\n".join(PHRASE_JOIN.format(k=k + 1, token=names[k]) for k in range(1, len(tokens)))
    adjacent = " AND ".join(f"start + {k} = ANY(p{k + 1}.positions)" for k in range(1, len(tokens)))
    sql = PHRASE_ROWS.format(
        number=number,
        store=store,
        joins=joins,
        shift=POSITION_SHIFT,
        adjacent=adjacent,
        token=names[0],
        rows=row_filter,
    )
    return sql, params


def weight_params() -> dict[str, float]:
    return {"w_title": WEIGHTS[0], "w_heading": WEIGHTS[1], "w_body": WEIGHTS[2]}


def bm25_params(stats: KeywordStats) -> dict[str, float]:
    """The constants of bm25.contributions as float8 parameters, so SQL evaluates the same
    doubles: idf * ((f * (k1 + 1.0)) / (f + k1 * ((1 - b) + ((b * D) / avgdl))))."""
    return {
        "k1": bm25.K1,
        "k1_plus_1": bm25.K1 + 1.0,
        "one_minus_b": 1 - bm25.B,
        "b": bm25.B,
        "avgdl": stats.avgdl,
    }


# One phrase's bm25 term for a row of phrase_rows_sql; :idf is the query's idf per phrase number.
CONTRIBUTION = """%(idf)s[h.phrase] * ((h.f * %(k1_plus_1)s)
        / (h.f + %(k1)s * (%(one_minus_b)s + ((%(b)s * h.length) / %(avgdl)s))))"""
