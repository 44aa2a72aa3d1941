"""The ranking statement on PostgreSQL: SQLite's RANKING (sqlite/search/ranking.py), step by step.

scope -> keyword candidates -> vector candidates -> ranks with public-id ties -> normalisation
and fusion -> recency decay -> ORDER BY ... LIMIT, in one statement, so scoping happens before
the limit here too. Before it, in the same snapshot (a REPEATABLE READ, READ ONLY transaction),
one statement reads the keyword statistics of the caller's readable set (keyword.py); idf, the
stop-word rule and hybrid's ceiling are computed from them in Python by SQLite's own functions.

The channels:
- keyword: FTS5's bm25 from the postings (keyword.py), summed in query order; the stop-word
  pruning of fts.py with its fallback to every term inside the statement.
- vector: the nearest rows by pgvector's cosine `<=>` (exact over the scope by default; the HNSW
  index with iterative scans for a large unscoped search: `choose_vector_plan`), then each
  candidate's similarity re-computed as sqlite-vec computes it (float32 sums in dimension order,
  see SQLITE_VEC_COSINE), so both backends give the same floats. pgvector sums in another order
  (its loops are vectorised): its distances differ from sqlite-vec's in the last float32 bits,
  which would move scores across the 6-decimal rounding of outputs. The pool is the depth plus
  TIE_MARGIN rows, so a near-tie at the cut is decided by the exact scores.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.pq import TransactionStatus

from kbmcp.search.ranking import WEAK_KEYWORD_SHARE, RankedRow, Ranking
from kbmcp.store.postgres import keyword
from kbmcp.store.postgres.keyword import CONTRIBUTION, KeywordStats, Phrase
from kbmcp.store.postgres.vectors import Float32Vector

# Unscoped searches over more indexed chunks than this use the HNSW index (as SQLite plan.py's
# VECTOR_EXACT_MAX_ROWS moves SQLite from exact SQL to vec0); scoped searches are always exact.
VECTOR_EXACT_MAX_ROWS = 20_000
TIE_MARGIN = 32  # pool rows beyond the depth (see the module docstring)
# A pool row may pass the floor by pgvector's distance and fail it by the exact one, never the
# reverse: the pool's floor is lowered by more than their largest difference (~1e-7).
FLOOR_SLACK = 1e-5
HNSW_EF_SEARCH_MAX = 1000  # pgvector's bound

NO_CANDIDATES = "SELECT NULL::bigint, NULL::float8 WHERE false"
SCOPE_IDS = "SELECT unnest(%(scope_ids)s::bigint[])"
NO_SCOPE_IDS = "SELECT NULL::bigint WHERE false"
READ_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
SET_ITERATIVE_SCAN = "SET LOCAL hnsw.iterative_scan = relaxed_order"
SET_EF_SEARCH = "SET LOCAL hnsw.ef_search = {ef}"

# ---------------------------------------------------------------- keyword channel

LEXICAL_KEPT = """lexical_kept_hit(phrase, chunk_id, length, f) AS MATERIALIZED (
{kept}
),
lexical_kept(chunk_id, score) AS MATERIALIZED (
    SELECT h.chunk_id, sum({contribution} ORDER BY h.phrase)
    FROM lexical_kept_hit AS h
    GROUP BY h.chunk_id
),
"""
# Only read when the kept terms find no more than :depth rows (the CTE is not computed when the
# branch that reads it is cut by its one-time filter).
LEXICAL_DROPPED = """lexical_dropped_hit(phrase, chunk_id, length, f) AS MATERIALIZED (
{dropped}
),
lexical_all(chunk_id, score) AS (
    SELECT h.chunk_id, sum({contribution} ORDER BY h.phrase)
    FROM (SELECT * FROM lexical_kept_hit UNION ALL SELECT * FROM lexical_dropped_hit) AS h
    GROUP BY h.chunk_id
),
"""
LEXICAL_BODY = """
    SELECT chunk_id, score FROM lexical_kept
    ORDER BY score DESC, chunk_id
    LIMIT %(depth)s + 1"""
LEXICAL_PRUNED_OR_ALL_BODY = """
    (SELECT chunk_id, score FROM lexical_kept
     WHERE (SELECT count(*) FROM lexical_kept) > %(depth)s
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)
    UNION ALL
    (SELECT chunk_id, score FROM lexical_all
     WHERE (SELECT count(*) FROM lexical_kept) <= %(depth)s
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)"""

# ---------------------------------------------------------------- vector channel

# sqlite-vec's vec_distance_cosine, operation for operation: float32 products summed in float32
# in dimension order (sum(real) adds float4 values; the ORDER BY fixes the order), the magnitudes'
# square roots and the division in double, `1 - x` rounded to float32 (its return type); NULL for
# a zero vector (0/0), which SQLite reports as NULL and the channel scores 0.
SQLITE_VEC_COSINE = """
    CROSS JOIN LATERAL (
        SELECT sum({ab} ORDER BY e.i) AS dot, sum({aa} ORDER BY e.i) AS a_mag,
               sum({bb} ORDER BY e.i) AS b_mag
        FROM unnest(v.embedding::real[], %(query_vector)b::vector::real[])
             WITH ORDINALITY AS e(a, b, i)) AS s"""
# A float32 product as C computes it: the exact product (a double holds it) rounded to float32.
# Not `real * real`: PostgreSQL raises "underflow" where C gives 0 (model vectors do hold
# components near 1e-37), and so does a cast of a double below float32's range; a product of at
# most half the smallest float32 (2^-150) rounds to 0, anything larger to a nonzero float32.
FLOAT32_PRODUCT = """(CASE WHEN abs({x}::float8 * {y}::float8) <= 7.006492321624085e-46::float8
                  THEN 0::real ELSE ({x}::float8 * {y}::float8)::real END)"""
SQLITE_VEC_SIMILARITY = """1.0::float8 - coalesce(
           ((1.0::float8 - s.dot::float8
             / nullif(sqrt(s.a_mag::float8) * sqrt(s.b_mag::float8), 0.0::float8))::float4)::float8,
           1.0::float8)"""
PASSES_FLOOR = """(%(min_similarity)s::float8 IS NULL OR {score} >= %(min_similarity)s::float8
       OR {chunk} = ANY(%(floor_exempt)s::bigint[]))"""
SEMANTIC_POOL = """semantic_pool(chunk_id) AS MATERIALIZED (
    SELECT v.chunk_id
    FROM chunk_vec AS v
    WHERE {rows}
      AND (%(min_similarity)s::float8 IS NULL
           OR 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
              >= %(min_similarity)s::float8 - %(floor_slack)s::float8
           OR v.chunk_id = ANY(%(floor_exempt)s::bigint[]))
    ORDER BY {order}
    LIMIT %(pool_size)s
),
semantic_exact(chunk_id, score) AS MATERIALIZED (
    SELECT v.chunk_id, {similarity}
    FROM semantic_pool AS p
    JOIN chunk_vec AS v ON v.chunk_id = p.chunk_id{cosine}
),
"""
SEMANTIC_BODY = """
    SELECT chunk_id, score FROM semantic_exact
    WHERE {floor}
    ORDER BY score DESC, chunk_id
    LIMIT %(depth)s + 1"""
# The HNSW index serves ORDER BY distance alone. The exact order is written so that no index can
# serve it (the planner would otherwise take the approximate index for an "exact" scan).
HNSW_ORDER = "v.embedding <=> %(query_vector)b::vector"
EXACT_ORDER = "1.0::float8 - (v.embedding <=> %(query_vector)b::vector) DESC, v.chunk_id"
VEC_IN_SCOPE = "v.chunk_id IN (SELECT id FROM scope_chunk)"
VEC_SEARCHED = "v.knowledge_base_id = ANY(%(searched_stores)s::bigint[])"

# ---------------------------------------------------------------- the statement

# SQLite's RANKING with PostgreSQL spellings: least() for the scalar min, greatest() for the
# scalar max, `COLLATE "C"` wherever public ids break ties (byte order, as SQLite's BINARY,
# whatever the database's locale), float8 parameters, and julianday() as SQLite computes it
# (JULIANDAY).
RANKING = """
WITH
scope_chunk(id) AS MATERIALIZED (
    {scope}
),
{channel_ctes}
lexical_hit(chunk_id, score) AS MATERIALIZED (
    {lexical}
),
semantic_hit(chunk_id, score) AS MATERIALIZED (
    {semantic}
),
channel_hit(channel, chunk_id, score, rank) AS (
    SELECT 'lexical', h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id COLLATE "C")
    FROM lexical_hit AS h
    JOIN chunk AS c ON c.id = h.chunk_id
    UNION ALL
    SELECT 'semantic', h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id COLLATE "C")
    FROM semantic_hit AS h
    JOIN chunk AS c ON c.id = h.chunk_id
),
candidate AS (
    SELECT channel, chunk_id, score, rank,
           coalesce((score - min(score) OVER per_channel)
                    / nullif(max(score) OVER per_channel - min(score) OVER per_channel,
                             0.0::float8),
                    1.0::float8)
           * CASE channel
             WHEN 'lexical' THEN
                 least(1.0::float8,
                       coalesce(max(score) OVER per_channel
                                / nullif(%(weak_share)s::float8 * %(lexical_ceiling)s::float8,
                                         0.0::float8),
                                1.0::float8))
             ELSE 1.0::float8
             END AS normalized
    FROM channel_hit
    WHERE rank <= %(depth)s
    WINDOW per_channel AS (PARTITION BY channel)
),
fused AS (
    SELECT chunk_id,
           max(CASE channel WHEN 'lexical' THEN rank END) AS lexical_rank,
           max(CASE channel WHEN 'lexical' THEN score END) AS lexical_score,
           max(CASE channel WHEN 'semantic' THEN rank END) AS semantic_rank,
           max(CASE channel WHEN 'semantic' THEN score END) AS semantic_score,
           sum(CASE %(mode)s::text
               WHEN 'rrf' THEN 1.0::float8 / (%(rrf_k)s + rank)
               WHEN 'hybrid' THEN
                   (CASE channel WHEN 'lexical' THEN %(alpha)s::float8
                    ELSE 1.0::float8 - %(alpha)s::float8 END) * normalized
               ELSE score
               END) AS score
    FROM candidate
    GROUP BY chunk_id
),
decayed AS (
    SELECT f.chunk_id, c.public_id AS chunk_public_id, d.public_id AS document_public_id,
           r.public_id AS revision_public_id, kb.public_id AS store_public_id, d.title, d.path,
           c.heading_path, c.char_start, c.char_end, c.line_start, c.line_end, c.text,
           f.lexical_rank, f.lexical_score, f.semantic_rank, f.semantic_score, f.score,
           d.kind AS format, r.content_hash, kb.kind AS store_kind,
           CASE WHEN kb.kind = 'memories' AND %(half_life)s::float8 > 0
                THEN power(2.0::float8,
                           -greatest({julian_now} - {julian_updated}, 0.0::float8)
                           / %(half_life)s::float8)
           END AS recency_weight
    FROM fused AS f
    JOIN chunk AS c ON c.id = f.chunk_id
    JOIN revision AS r ON r.id = c.revision_id
    JOIN document AS d ON d.id = r.document_id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
)
SELECT chunk_id, chunk_public_id, document_public_id, revision_public_id, store_public_id,
       title, path, heading_path, char_start, char_end, line_start, line_end, text,
       lexical_rank, lexical_score, semantic_rank, semantic_score,
       score * coalesce(recency_weight, 1.0::float8) AS final_score, format, content_hash,
       store_kind, recency_weight,
       count(*) OVER () AS fused_count,
       (SELECT count(*) FROM lexical_hit) AS lexical_found,
       (SELECT count(*) FROM semantic_hit) AS semantic_found
FROM decayed
ORDER BY final_score DESC, chunk_public_id COLLATE "C"
LIMIT %(limit)s
"""
# SQLite's julianday(): the time in whole milliseconds (rounded) since the Julian epoch, divided
# by the milliseconds of a day; the Unix epoch is Julian day 2440587.5.
JULIANDAY = """((round(extract(epoch FROM ({value})::timestamptz) * 1000)::bigint
                 + 210866760000000)::float8 / 86400000.0::float8)"""


@dataclass(frozen=True)
class RankRequest:
    """One search as the ranking needs it (built by search.py from the engine's RankQuery).

    `readable_stores`: every knowledge base and memory store the principal may read (the
    keyword statistics' rows); `searched_stores`: the stores searched (the kinds the request
    includes); `scope_ids`: the chunk ids of a filtered scope, None when the scope is every
    indexed chunk of the searched stores; `every_store`: the searched stores are every store of
    the database (fts.py's "unscoped" for the stop-word rule)."""

    terms: Sequence[str]
    query_vector: np.ndarray | None  # a unit vector, None: no vector channel
    lexical: bool  # run the keyword channel
    readable_stores: Sequence[int]
    searched_stores: Sequence[int]
    scope_ids: np.ndarray | None
    every_store: bool
    mode: str
    alpha: float
    rrf_k: int
    depth: int
    limit: int
    half_life_days: float = 0.0
    now: str = ""
    min_similarity: float | None = None
    floor_exempt: Sequence[int] = ()


@dataclass(frozen=True)
class PgRanking:
    ranking: Ranking
    lexical_strategy: str | None
    vector_strategy: str | None
    ceiling: float


@dataclass(frozen=True)
class _Channel:
    strategy: str | None
    body: str = NO_CANDIDATES
    ctes: str = ""
    params: dict[str, Any] | None = None
    ceiling: float = 0.0


def rank(conn: psycopg.Connection[Any], request: RankRequest) -> PgRanking:
    """Keyword statistics, then the ranking statement, in one read-only snapshot."""
    with read_snapshot(conn):
        lexical = _lexical(conn, request) if request.lexical else _Channel(None)
        semantic = _semantic(conn, request)
        has_ids = request.scope_ids is not None and len(request.scope_ids) > 0
        sql = RANKING.format(
            scope=SCOPE_IDS if has_ids else NO_SCOPE_IDS,
            channel_ctes=lexical.ctes + semantic.ctes,
            lexical=lexical.body,
            semantic=semantic.body,
            julian_now=JULIANDAY.format(value="%(now)s::text"),
            julian_updated=JULIANDAY.format(value="d.updated_at"),
        )
        params: dict[str, Any] = {
            "mode": request.mode,
            "alpha": request.alpha,
            "lexical_ceiling": lexical.ceiling,
            "weak_share": WEAK_KEYWORD_SHARE,
            "rrf_k": request.rrf_k,
            "depth": request.depth,
            "limit": request.limit,
            "half_life": request.half_life_days,
            "now": request.now or None,
            "searched_stores": sorted(request.searched_stores),
            **(lexical.params or {}),
            **(semantic.params or {}),
        }
        if has_ids:
            assert request.scope_ids is not None
            params["scope_ids"] = np.asarray(request.scope_ids, dtype=np.int64).tolist()
        rows = conn.execute(sql, params).fetchall()
    ranking = (
        Ranking([], 0, 0, 0)
        if not rows
        else Ranking(
            rows=[RankedRow(*row[:22]) for row in rows],
            fused_count=rows[0][22],
            lexical_found=rows[0][23],
            semantic_found=rows[0][24],
        )
    )
    return PgRanking(ranking, lexical.strategy, semantic.strategy, lexical.ceiling)


@contextlib.contextmanager
def read_snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """The caller's snapshot when it has one open (a search runs inside the store's
    `read_snapshot`, with its scope), else a REPEATABLE READ, READ ONLY transaction."""
    if conn.info.transaction_status != TransactionStatus.IDLE:
        yield
        return
    with conn.transaction():
        conn.execute(READ_SNAPSHOT)
        yield


def _scope_rows(conn: psycopg.Connection[Any], request: RankRequest) -> int:
    """Indexed chunks in the scope (the searched stores' count from their keyword totals)."""
    if request.scope_ids is not None:
        return len(request.scope_ids)
    return int(
        conn.execute(keyword.STORE_TOTALS, {"stores": sorted(request.searched_stores)}).fetchone()[
            0
        ]
    )


def _lexical(conn: psycopg.Connection[Any], request: RankRequest) -> _Channel:
    phrases: list[Phrase] = [(term, keyword.query_tokens(term)) for term in request.terms]
    phrases = [(term, tokens) for term, tokens in phrases if tokens]
    if not phrases:
        return _Channel("postings")
    stats = keyword.keyword_stats(conn, phrases, request.readable_stores)
    # hybrid's keyword scale: the sum of the phrases' idf in query order (lexical/ceiling.py)
    ceiling = 0.0
    if request.mode == "hybrid" and stats.rows:
        for term, _ in phrases:
            ceiling += stats.idf(term)
    if stats.rows == 0:
        return _Channel("postings", ceiling=ceiling)
    unscoped = request.every_store and request.scope_ids is None
    scope_rows = None if unscoped else _scope_rows(conn, request)
    kept, dropped = keyword.prune(phrases, stats, scope_rows, request.depth)
    number = {term: i + 1 for i, (term, _) in enumerate(phrases)}  # 1-based: SQL arrays
    rows = "searched" if request.scope_ids is None else "scope"
    params: dict[str, Any] = {
        "idf": [stats.idf(term) for term, _ in phrases],
        **keyword.bm25_params(stats),
        **keyword.weight_params(),
    }

    def union(selected: list[Phrase]) -> str:
        parts = []
        for term, tokens in selected:
            sql, token_params = keyword.phrase_rows_sql(tokens, rows, number[term])
            parts.append(sql)
            params.update(token_params)
        return "\n    UNION ALL".join(parts)

    contribution = CONTRIBUTION.replace("%(idf)s", "(%(idf)s::float8[])")
    ctes = LEXICAL_KEPT.format(kept=union(kept), contribution=contribution)
    body = LEXICAL_BODY
    if dropped:
        ctes += LEXICAL_DROPPED.format(dropped=union(dropped), contribution=contribution)
        body = LEXICAL_PRUNED_OR_ALL_BODY
    return _Channel("postings", body, ctes, params, ceiling)


def choose_vector_plan(scoped: bool, searched_rows: int, has_hnsw: bool) -> str:
    """ "exact": every row of the scope by `<=>`; "hnsw": the HNSW index with iterative scans,
    for an unscoped search over more than VECTOR_EXACT_MAX_ROWS chunks."""
    if not scoped and has_hnsw and searched_rows > VECTOR_EXACT_MAX_ROWS:
        return "hnsw"
    return "exact"


def _semantic(conn: psycopg.Connection[Any], request: RankRequest) -> _Channel:
    if request.query_vector is None:
        return _Channel(None)
    from kbmcp.store.postgres.vectors import has_index

    scoped = request.scope_ids is not None
    searched_rows = 0 if scoped else _scope_rows(conn, request)
    strategy = choose_vector_plan(scoped, searched_rows, not scoped and has_index(conn))
    pool_size = request.depth + 1 + TIE_MARGIN
    if strategy == "hnsw":
        conn.execute(SET_ITERATIVE_SCAN)
        conn.execute(SET_EF_SEARCH.format(ef=min(HNSW_EF_SEARCH_MAX, max(40, pool_size))))
    ctes = SEMANTIC_POOL.format(
        rows=VEC_IN_SCOPE if scoped else VEC_SEARCHED,
        order=HNSW_ORDER if strategy == "hnsw" else EXACT_ORDER,
        similarity=SQLITE_VEC_SIMILARITY,
        cosine=SQLITE_VEC_COSINE.format(
            ab=FLOAT32_PRODUCT.format(x="e.a", y="e.b"),
            aa=FLOAT32_PRODUCT.format(x="e.a", y="e.a"),
            bb=FLOAT32_PRODUCT.format(x="e.b", y="e.b"),
        ),
    )
    body = SEMANTIC_BODY.format(floor=PASSES_FLOOR.format(score="score", chunk="chunk_id"))
    vector = np.ascontiguousarray(request.query_vector, dtype=np.float32)
    params = {
        "query_vector": Float32Vector(vector.astype("<f4").tobytes()),
        "min_similarity": request.min_similarity,
        "floor_exempt": [int(i) for i in request.floor_exempt],
        "floor_slack": FLOOR_SLACK,
        "pool_size": pool_size,
    }
    return _Channel(f"pg_{strategy}", body, ctes, params)


def keyword_stats_for(
    conn: psycopg.Connection[Any], terms: Sequence[str], stores: Sequence[int]
) -> KeywordStats:
    """The statistics a search over `stores` (readable) scores `terms` with (for tests/tools)."""
    phrases = [(term, keyword.query_tokens(term)) for term in terms]
    return keyword.keyword_stats(conn, [p for p in phrases if p[1]], stores)
