"""The ranking on PostgreSQL: SQLite's RANKING (sqlite/search/ranking.py), step for step.

scope -> keyword candidates -> vector candidates -> ranks with public-id ties -> normalisation
and fusion -> recency decay -> ORDER BY ... LIMIT, so scoping happens before the limit here too.
One search is, in one snapshot (a REPEATABLE READ, READ ONLY transaction):
1. the keyword statistics of the caller's readable set (keyword.py: a few rows of keyword_total
   and keyword_token); idf, the stop-word rule and hybrid's ceiling are computed from them in
   Python by SQLite's own functions;
2. the channels statement (CHANNELS): the scope, the keyword channel's candidates (at most
   depth + 1, scored) and the vector channel's pool (rows with their vectors);
3. the pool scored exactly here (`sqlite_vec_similarity`), its best depth + 1 kept;
4. the ranking statement (RANKING): both channels' candidates as parameters, as an
   accelerator's candidates enter SQLite's statement; ranks, fusion, decay, the limit and the
   cited rows.
On a Citus cluster (citus.py) a search over several stores runs these steps with the channels
statement once per store and merges the candidates (shards.py); `rank` here is the rest.

The channels and their plans (reported as the search's strategies):
- keyword, "postings": FTS5's bm25 from every posting of the kept phrases in the scope
  (keyword.py), summed in query order; the stop-word pruning of fts.py with its fallback to
  every term inside the statement. The postings are read by token, or by scope chunk when the
  scope is small against them (`choose_token_reads`); same rows, same scores.
- keyword, "postings_bounded": a large unscoped search (where the vector channel uses the HNSW
  index) takes each kept token's best postings by impact as candidates and scores the best of
  them exactly with every kept phrase: approximate in which rows are candidates, exact in their
  scores (`choose_lexical_plan`).
- vector, "pg_exact": the scope's rows nearest by pgvector's cosine `<=>`; "pg_hnsw": for a
  large unscoped search the HNSW index with iterative scans, plus the keyword channel's
  candidates (a row both channels rank high is then never lost by the approximate index)
  (`choose_vector_plan`). Either way each pool row's similarity is then computed as sqlite-vec
  computes it (float32 sums in dimension order), so both backends give the same floats:
  pgvector sums in another order (its loops are vectorised), and its distances differ from
  sqlite-vec's in the last float32 bits, which would move scores across the 6-decimal rounding
  of outputs. The exact pool is the depth plus TIE_MARGIN rows, so a near-tie at the cut is
  decided by the exact scores. (Scoring the pool in SQL, as a first version did, cost ~70 us a
  row: most of a small scope's search.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from kbmcp.search.ranking import WEAK_KEYWORD_SHARE, RankedRow, Ranking
from kbmcp.store.postgres import citus, connection, halves, keyword
from kbmcp.store.postgres.keyword import CONTRIBUTION, KeywordStats, Phrase
from kbmcp.store.postgres.scope import ScopeQuery, ScopeRuns, runs_of_rows
from kbmcp.store.postgres.vectors import Float32Vector

# Unscoped searches over more indexed chunks than this use the HNSW index and the bounded
# keyword plan (as plan.py's VECTOR_EXACT_MAX_ROWS moves SQLite from exact SQL to vec0); scoped
# searches are always exact.
VECTOR_EXACT_MAX_ROWS = 20_000
TIE_MARGIN = 32  # pool rows beyond the depth (see the module docstring)
# A pool row may pass the floor by pgvector's distance and fail it by the exact one, never the
# reverse: the pool's floor is lowered by more than their largest difference (~1e-7).
FLOOR_SLACK = 1e-5
HNSW_EF_SEARCH_MAX = 1000  # pgvector's bound
# The HNSW search's breadth (pgvector's default is 40); the pool is as large (its rows are
# cheap to score exactly): recall against cost, bench/search.py.
HNSW_EF_SEARCH = 400
# The bounded keyword plan: each kept token's best postings per searched store, and how many
# candidates (times depth + 1) are scored exactly: recall against cost, bench/search.py. Below
# BOUNDED_MIN_POSTINGS postings of the kept tokens every posting is read.
BOUNDED_LIST_SIZE = 1000
BOUNDED_RESCORED_PER_DEPTH = 4
BOUNDED_MIN_POSTINGS = 20_000
# A scope chunk's postings cost about as much to read as this many postings of a token (an
# index descent and a heap page per chunk, against an index-only range: bench/search.py).
CHUNK_READ_POSTINGS = 40
# A range of one token's postings in one run of a scope costs this many postings' reads on top
# of the postings it holds (an index descent and a step of the LATERAL loop).
RANGE_READ_POSTINGS = 8

# Statements whose plans depend on their parameters (the channels statement, a phrase's
# count) are sent unprepared (`prepare=False`), so each is planned for its
# own: psycopg prepares a statement run 5 times on a connection, and PostgreSQL may then plan it
# once for any parameters - with no row estimate for a token and a scope array that is no longer
# a constant. The ranking statement's plan does not (about 200 candidates joined by primary
# keys): it is prepared, and PostgreSQL keeps one plan for it when that is no worse (its planning
# was ~1 ms a search, a third of its time at small scopes).
#
# The search's settings, local to the read snapshot (set_config(name, value, true) is SET LOCAL),
# made by the search's first statement (PRELUDE):
# - no merge joins: the planner cannot know that a scope's ids are distinct, expects a join of
#   the postings to the scope to multiply rows and sorts both sides for a merge join (~40 ms for
#   100k postings), where hashing the scope and streaming the postings through it is the plan;
# - the HNSW index's breadth and iterative scans (read only by a `pg_hnsw` pool).
SEARCH_SETTINGS = """set_config('enable_mergejoin', 'off', true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', %(ef_search)s::text, true)"""
# The search's first statement, one round trip for what the channels statement is written from:
# the settings; the searched stores' indexed chunks (their keyword totals) and whether the HNSW
# index exists; the keyword statistics of the readable stores (keyword.py's STORE_TOTALS and
# TOKEN_ROWS); a filtered scope's runs (scope.py's SCOPE_RUN_CTES and SCOPE_RUN_COLUMNS).
PRELUDE = """{ctes}
SELECT {settings},
       (SELECT coalesce(sum(rows), 0)::bigint FROM keyword_total
        WHERE knowledge_base_id = ANY(%(searched_stores)s::bigint[])),
       to_regclass('chunk_vec_hnsw') IS NOT NULL,
       (SELECT ARRAY[coalesce(sum(rows), 0), coalesce(sum(tokens), 0)]::bigint[]
        FROM keyword_total
        WHERE knowledge_base_id = ANY(%(readable_stores)s::bigint[])),
       (SELECT array_agg(token ORDER BY token) FROM keyword_token
        WHERE token = ANY(%(stats_tokens)s::text[])
          AND knowledge_base_id = ANY(%(readable_stores)s::bigint[])),
       (SELECT array_agg(rows ORDER BY token) FROM keyword_token
        WHERE token = ANY(%(stats_tokens)s::text[])
          AND knowledge_base_id = ANY(%(readable_stores)s::bigint[])),
       {scope_columns}
"""
NO_SCOPE_COLUMNS = "NULL::bigint[], NULL::bigint[]"

# ---------------------------------------------------------------- the channels statement

# Rows: (kind, chunk_id, bm25 score or pgvector's similarity, vector or NULL); kind: SEMANTIC,
# LEXICAL, or (a search store by store, shards.py) LEXICAL_ALL and KEPT_COUNT. A filtered scope
# enters as runs of consecutive chunk ids of one store each (scope.py's ScopeRuns):
# scope_range, one row per run, read by the channels as index ranges of the run's store;
# scope_chunk, its ids one by one, only for the plans that join them (a CTE no branch reads is
# never computed). The scope's ids are distinct (a scope is a set of chunks): the channels JOIN
# it rather than test IN, so no step de-duplicates it again. Trap (Citus): every literal that a
# UNION puts beside a column is cast (`0::integer`, `{number}::integer`): Citus sends a router
# query to its worker as SQL it writes back from the plan, where such a literal arrived as text
# ("UNION/INTERSECT/EXCEPT could not convert type text to integer").
CHANNELS = """
WITH
{scope_ctes}
{lexical_ctes}
lexical_hit(chunk_id, score, kind) AS MATERIALIZED (
    {lexical}
),
semantic_pool(chunk_id, embedding, similarity) AS MATERIALIZED (
    {semantic}
)
SELECT kind, chunk_id, score, NULL::vector FROM lexical_hit
UNION ALL
SELECT 0::integer, chunk_id, similarity, embedding FROM semantic_pool{extra}
"""
SEMANTIC, LEXICAL, LEXICAL_ALL, KEPT_COUNT = 0, 1, 2, 3
# A store's count of rows the kept terms find (shards.py: the fallback to every term is decided
# over every searched store).
KEPT_COUNT_ROW = """
UNION ALL
SELECT 3::integer, count(*), NULL::float8, NULL::vector FROM lexical_kept"""
SCOPE_CTES = """scope_range(store, lo, hi) AS MATERIALIZED (
    {scope}
),
scope_chunk(store, id) AS MATERIALIZED (
    SELECT r.store, generate_series(r.lo, r.hi) FROM scope_range AS r
),"""
# The two halves of CHANNELS as two statements, for a large scope's two connections
# (halves.py): the keyword half on the search's connection, the vector half on the helper.
LEXICAL_CHANNEL = """
WITH
{scope_ctes}
{lexical_ctes}
lexical_hit(chunk_id, score, kind) AS MATERIALIZED (
    {lexical}
)
SELECT kind, chunk_id, score, NULL::vector FROM lexical_hit
"""
SEMANTIC_CHANNEL = """
WITH
{scope_ctes}
semantic_pool(chunk_id, embedding, similarity) AS MATERIALIZED (
    {semantic}
)
SELECT 0::integer, chunk_id, similarity, embedding FROM semantic_pool
"""
SCOPE_RANGES = """SELECT * FROM unnest(%(scope_store)s::bigint[], %(scope_lo)s::bigint[],
                         %(scope_hi)s::bigint[])"""
NO_SCOPE_RANGES = "SELECT NULL::bigint, NULL::bigint, NULL::bigint WHERE false"
NO_LEXICAL = "SELECT NULL::bigint, NULL::float8, NULL::integer WHERE false"
NO_SEMANTIC = "SELECT NULL::bigint, NULL::vector, NULL::float8 WHERE false"

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
    SELECT chunk_id, score, 1::integer FROM lexical_kept
    ORDER BY score DESC, chunk_id
    LIMIT %(depth)s + 1"""
LEXICAL_PRUNED_OR_ALL_BODY = """
    (SELECT chunk_id, score, 1::integer FROM lexical_kept
     WHERE (SELECT count(*) FROM lexical_kept) > %(depth)s
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)
    UNION ALL
    (SELECT chunk_id, score, 1::integer FROM lexical_all
     WHERE (SELECT count(*) FROM lexical_kept) <= %(depth)s
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)"""
# One store of a search over several (shards.py): both candidate lists, the kept terms' and every
# term's, and (KEPT_COUNT_ROW) how many rows the kept terms find; which list a search takes is
# decided once every store's count is known.
LEXICAL_KEPT_AND_ALL_BODY = """
    (SELECT chunk_id, score, 1::integer FROM lexical_kept
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)
    UNION ALL
    (SELECT chunk_id, score, 2::integer FROM lexical_all
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)"""

# The postings of a query's single-token phrases: (phrase number, chunk id, D, f). Two phrases
# may be the same token: each counts, as in FTS5. f is FTS5's sum of one column weight per
# instance (weights are parameters: exact for weights on the 1/1024 grid).
POSTING_F = "(p.in_title * %(w_title)s + p.in_heading * %(w_heading)s + p.in_body * %(w_body)s)"
# By token: one index-only range of chunk_term_by_impact per token (each token a constant, so
# the planner knows how many rows each has).
TOKEN_POSTINGS = """
    SELECT {number}::integer AS phrase, p.chunk_id, p.length, {f} AS f{store}
    FROM chunk_term AS p
    WHERE p.token = %({token})s AND p.knowledge_base_id = ANY(%(searched_stores)s::bigint[])"""
# In a scope: a hash join with the scope's ids and stores (see SEARCH_SETTINGS), once for every
# token's postings. Not `= ANY(array)`: PostgreSQL would hash the array at run time, but
# estimating each such test at planning time walks the whole array (~7 ms per token for 10k ids).
TOKENS_IN_SCOPE = """
    SELECT h.phrase, h.chunk_id, h.length, h.f
    FROM ({postings}) AS h
    JOIN scope_chunk AS s ON s.store = h.store AND s.id = h.chunk_id"""
POSTING_STORE = ", p.knowledge_base_id AS store"
# By range: each token's postings in each run of the scope, one range of chunk_term_by_chunk_id
# (token, chunk_id) per token and run, index-only: a scope's postings without reading the
# token's others (sql/004_scope_ranges.sql). OFFSET 0 keeps the LATERAL subquery a range scan
# per (token, run). Every id of a run is a chunk of the run's store (scope.py's ScopeRuns), so
# the range names no store; the searched stores are named for Citus's routing (RANKING's note)
# and cost one comparison per posting.
TOKENS_IN_RANGES = """
    SELECT q.phrase, p.chunk_id, p.length, {f} AS f
    FROM unnest(%({tokens})s::text[], %({phrases})s::integer[]) AS q(token, phrase)
    CROSS JOIN scope_range AS r
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.length, p.in_title, p.in_heading, p.in_body
        FROM chunk_term AS p
        WHERE p.token = q.token AND p.chunk_id BETWEEN r.lo AND r.hi
          AND p.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
        OFFSET 0) AS p"""
# By chunk: each row's postings of the tokens, one search of the primary key (chunk_id, token)
# per row. OFFSET 0 keeps the LATERAL subquery a per-row search: flattened, the planner may
# read the tokens' whole ranges instead (it cannot tell how many rows a token has here).
TOKENS_OF_ROWS = """
    SELECT q.phrase, p.chunk_id, p.length, p.f
    FROM {rows} AS s
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.token, p.length, {f} AS f
        FROM chunk_term AS p
        WHERE p.chunk_id = s.{id} AND p.knowledge_base_id = s.store
          AND p.token = ANY(%({tokens})s::text[])
          AND p.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
        OFFSET 0) AS p
    JOIN unnest(%({tokens})s::text[], %({phrases})s::integer[]) AS q(token, phrase)
      ON q.token = p.token"""

# The bounded plan (a large unscoped search, "postings_bounded"): each kept token's best
# postings by impact in each searched store (chunk_term_by_impact, read best first) are the
# candidates; the best of them by their partial sums are scored exactly with every kept phrase
# (TOKENS_OF_ROWS over lexical_candidate).
LEXICAL_BOUNDED = """lexical_list(phrase, chunk_id, store, length, f) AS MATERIALIZED (
{lists}
),
lexical_candidate(chunk_id, store) AS MATERIALIZED (
    SELECT h.chunk_id, h.store
    FROM lexical_list AS h
    GROUP BY h.chunk_id, h.store
    ORDER BY sum({contribution} ORDER BY h.phrase) DESC, h.chunk_id
    LIMIT %(rescored)s
),
"""
TOKEN_LIST = """
    SELECT {number}::integer AS phrase, l.chunk_id, store.id, l.length, l.f
    FROM unnest(%(searched_stores)s::bigint[]) AS store(id)
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.length, {f} AS f
        FROM chunk_term AS p
        WHERE p.token = %({token})s AND p.knowledge_base_id = store.id
        ORDER BY p.impact DESC
        LIMIT %(list_size)s) AS l"""

# ---------------------------------------------------------------- vector channel

# The pool: the nearest rows by pgvector's cosine distance, with their vectors. A row may pass
# the floor by pgvector's distance and fail it by the exact one, never the reverse: the pool's
# floor is lowered by FLOOR_SLACK.
POOL_FLOOR = """(%(min_similarity)s::float8 IS NULL
           OR 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
              >= %(min_similarity)s::float8 - %(floor_slack)s::float8
           OR v.chunk_id = ANY(%(floor_exempt)s::bigint[]))"""
# The exact order is written so that no index can serve it (the planner would otherwise take
# the approximate index for an "exact" scan). A scope's rows are read run by run, each a range
# of the primary key (OFFSET 0: a range scan per run).
EXACT_POOL = """
    SELECT v.chunk_id, v.embedding, 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
    FROM scope_range AS r
    CROSS JOIN LATERAL (
        SELECT v.chunk_id, v.embedding
        FROM chunk_vec AS v
        WHERE v.chunk_id BETWEEN r.lo AND r.hi
          AND v.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
        OFFSET 0) AS v
    WHERE {floor}
    ORDER BY 3 DESC, v.chunk_id
    LIMIT %(pool_size)s"""
# A search of whole stores: their rows through chunk_vec_by_store (migration 6) when they are
# few, a scan of the table when they are most of it; never every tenant's rows for a few.
EXACT_UNSCOPED_POOL = """
    SELECT v.chunk_id, v.embedding, 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
    FROM chunk_vec AS v
    WHERE v.knowledge_base_id = ANY(%(searched_stores)s::bigint[]) AND {floor}
    ORDER BY 3 DESC, v.chunk_id
    LIMIT %(pool_size)s"""
# The HNSW index serves ORDER BY distance alone; the keyword channel's candidates join the pool.
HNSW_POOL = """
    (SELECT v.chunk_id, v.embedding, 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
     FROM chunk_vec AS v
     WHERE v.knowledge_base_id = ANY(%(searched_stores)s::bigint[]) AND {floor}
     ORDER BY v.embedding <=> %(query_vector)b::vector
     LIMIT %(pool_size)s)
    UNION ALL
    SELECT v.chunk_id, v.embedding, 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
    FROM lexical_hit AS h
    JOIN chunk_vec AS v ON v.chunk_id = h.chunk_id
    WHERE v.knowledge_base_id = ANY(%(searched_stores)s::bigint[])"""

# ---------------------------------------------------------------- the ranking statement

# Every read of a store table names the searched stores (`= ANY(%(searched_stores)s)`), besides
# the joins on the store: Citus routes a statement to one shard only when each table in it is
# filtered on the distribution column by a value (a join to another table's column is not
# enough), so a search of one store is then one router query.
#
# SQLite's RANKING with PostgreSQL spellings: least() for the scalar min, greatest() for the
# scalar max, `COLLATE "C"` wherever public ids break ties (byte order, as SQLite's BINARY,
# whatever the database's locale), float8 parameters, and julianday() as SQLite computes it
# (JULIANDAY). Each channel's candidates, already scoped, enter as parameters (exact doubles:
# psycopg writes a float as its shortest repr, which PostgreSQL reads back to the same double),
# as an accelerator's candidates enter SQLite's statement.
RANKING = """
WITH
lexical_hit(chunk_id, score) AS MATERIALIZED (
    SELECT * FROM unnest(%(lexical_ids)s::bigint[], %(lexical_scores)s::float8[])
),
semantic_hit(chunk_id, score) AS MATERIALIZED (
    SELECT * FROM unnest(%(semantic_ids)s::bigint[], %(semantic_scores)s::float8[])
),
channel_hit AS (
    SELECT 'lexical'::text AS channel, h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id COLLATE "C") AS rank
    FROM lexical_hit AS h
    JOIN chunk AS c
      ON c.id = h.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
    UNION ALL
    SELECT 'semantic'::text, h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id COLLATE "C")
    FROM semantic_hit AS h
    JOIN chunk AS c
      ON c.id = h.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
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
-- Recency decay (memories only): per fused chunk only what the order needs is read, its public
-- id and, in the subquery that the CASE skips when half_life is 0, its store kind and age.
weighted AS (
    SELECT f.chunk_id, c.public_id AS chunk_public_id,
           f.lexical_rank, f.lexical_score, f.semantic_rank, f.semantic_score, f.score,
           CASE WHEN %(half_life)s::float8 > 0 THEN (
               SELECT power(2.0::float8,
                            -greatest({julian_now} - {julian_updated}, 0.0::float8)
                            / %(half_life)s::float8)
               FROM revision AS r
               JOIN document AS d
                 ON d.knowledge_base_id = r.knowledge_base_id AND d.id = r.document_id
               JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
               WHERE r.knowledge_base_id = c.knowledge_base_id AND r.id = c.revision_id
                 AND r.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
                 AND kb.kind = 'memories')
           END AS recency_weight
    FROM fused AS f
    JOIN chunk AS c
      ON c.id = f.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
),
-- MATERIALIZED: the citation joins below run for the `limit` rows kept, not for every fused
-- chunk (~180 at depth 100), whose text and heading the sort no longer carries either.
ranked AS MATERIALIZED (
    SELECT chunk_id, chunk_public_id, lexical_rank, lexical_score, semantic_rank,
           semantic_score, score * coalesce(recency_weight, 1.0::float8) AS final_score,
           recency_weight, count(*) OVER () AS fused_count
    FROM weighted
    ORDER BY final_score DESC, chunk_public_id COLLATE "C"
    LIMIT %(limit)s
)
SELECT k.chunk_id, k.chunk_public_id, d.public_id, r.public_id, kb.public_id,
       d.title, d.path, c.heading_path, c.char_start, c.char_end, c.line_start, c.line_end,
       c.text, k.lexical_rank, k.lexical_score, k.semantic_rank, k.semantic_score,
       k.final_score, d.kind, r.content_hash, kb.kind, k.recency_weight, k.fused_count,
       (SELECT count(*) FROM lexical_hit) AS lexical_found,
       (SELECT count(*) FROM semantic_hit) AS semantic_found,
       kb.name
FROM ranked AS k
JOIN chunk AS c
  ON c.id = k.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
JOIN revision AS r ON r.knowledge_base_id = c.knowledge_base_id AND r.id = c.revision_id
JOIN document AS d ON d.knowledge_base_id = r.knowledge_base_id AND d.id = r.document_id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE r.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
  AND d.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
ORDER BY k.final_score DESC, k.chunk_public_id COLLATE "C"
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
    includes); `scope`: the chunk ids of a filtered scope as runs, None when the scope is every
    indexed chunk of the searched stores; `every_store`: the searched stores are every store of
    the database (fts.py's "unscoped" for the stop-word rule)."""

    terms: Sequence[str]
    query_vector: np.ndarray | None  # a unit vector, None: no vector channel
    lexical: bool  # run the keyword channel
    readable_stores: Sequence[int]
    searched_stores: Sequence[int]
    scope: ScopeRuns | None
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
    scope_rows: int | None = None  # a filtered scope's chunks


@dataclass(frozen=True)
class _Lexical:
    """The keyword channel's part of the channels statement."""

    strategy: str | None
    ctes: str = ""
    body: str = NO_LEXICAL
    params: dict[str, Any] | None = None
    ceiling: float = 0.0  # hybrid's keyword scale


@dataclass(frozen=True)
class _Semantic:
    """The vector channel's part of the channels statement."""

    strategy: str | None
    body: str = NO_SEMANTIC
    params: dict[str, Any] | None = None


def rank(
    conn: psycopg.Connection[Any], request: RankRequest, scope: ScopeQuery | None = None
) -> PgRanking:
    """Settings, statistics and scope (one statement), the channels statement, exact vector
    scores, the ranking statement: in one read-only snapshot. `scope`: a filtered scope to read
    in the first statement (then `request.scope` is its runs)."""
    phrases = phrases_of(request)
    with connection.read_snapshot(conn):
        citus.set_search_settings(conn, hnsw_ef_search(request.depth))
        first = prelude(conn, request, phrases, scope)
        if first.scope is not None:
            request = dataclasses.replace(request, scope=first.scope)
        searched_rows, has_hnsw = searched_size(request, first)
        lexical = _Lexical(None)
        if request.lexical:
            plan = lexical_plan(conn, request, phrases, first, searched_rows)
            lexical = lexical_sql(plan, request, phrases)
        semantic = semantic_sql(request, searched_rows, has_hnsw)
        found = channel_rows(conn, request, lexical, semantic)
        lexical_ids = [row[1] for row in found if row[0] == LEXICAL]
        lexical_scores = [row[2] for row in found if row[0] == LEXICAL]
        pool = [(row[1], row[3]) for row in found if row[0] == SEMANTIC]
        semantic_ids, semantic_scores = best_of_pool(pool, request)
        ranking = rank_candidates(
            conn, request, lexical.ceiling, (lexical_ids, lexical_scores),
            (semantic_ids, semantic_scores),
        )  # fmt: skip
    scope_rows = None if request.scope is None else request.scope.rows
    return PgRanking(ranking, lexical.strategy, semantic.strategy, lexical.ceiling, scope_rows)


def phrases_of(request: RankRequest) -> list[Phrase]:
    """The query's phrases that have index tokens, when the keyword channel runs."""
    return _phrases(request) if request.lexical else []


def searched_size(request: RankRequest, first: _Prelude) -> tuple[int, bool]:
    """How many rows the channels search, and whether an HNSW index may serve them: a scope
    reads no index but its own rows."""
    if request.scope is not None:
        return request.scope.rows, False
    return first.searched_rows, first.has_hnsw


def channel_rows(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    lexical: _Lexical,
    semantic: _Semantic,
    *,
    kept_count: bool = False,
) -> list[tuple[Any, ...]]:
    """The channels statement's rows (CHANNELS) over `request.searched_stores` and its scope;
    `kept_count`: with the KEPT_COUNT row (a store of a search over several). One statement,
    or for a large scope with both channels its two halves on two connections of one snapshot
    (halves.py; not on Citus, where the coordinator's exported snapshot does not reach the
    workers' transactions)."""
    params: dict[str, Any] = {
        "depth": request.depth,
        "searched_stores": sorted(request.searched_stores),
        **(lexical.params or {}),
        **(semantic.params or {}),
    }
    if request.scope is not None:
        params["scope_store"] = bigint_array_literal(request.scope.store)
        params["scope_lo"] = bigint_array_literal(request.scope.lo)
        params["scope_hi"] = bigint_array_literal(request.scope.hi)
    scope_ctes = SCOPE_CTES.format(
        scope=SCOPE_RANGES if request.scope is not None else NO_SCOPE_RANGES
    )
    scope_rows = None if request.scope is None else request.scope.rows
    both = lexical.strategy is not None and semantic.strategy is not None
    if citus.is_citus(conn) or not halves.worth_two(conn, scope_rows, both):
        statement = CHANNELS.format(
            scope_ctes=scope_ctes,
            lexical_ctes=lexical.ctes,
            lexical=lexical.body,
            semantic=semantic.body,
            extra=KEPT_COUNT_ROW if kept_count and lexical.ctes else "",
        )
        with conn.cursor(binary=True) as cur:
            return cur.execute(statement, params, prepare=False).fetchall()
    keyword_half = LEXICAL_CHANNEL.format(scope_ctes=scope_ctes, lexical_ctes=lexical.ctes,
                                          lexical=lexical.body)  # fmt: skip
    vector_half = SEMANTIC_CHANNEL.format(scope_ctes=scope_ctes, semantic=semantic.body)

    def own() -> list[tuple[Any, ...]]:
        with conn.cursor(binary=True) as cur:
            return cur.execute(keyword_half, params, prepare=False).fetchall()

    mine, other = halves.run_halves(conn, own, vector_half, params)
    return mine + other


def rank_candidates(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    ceiling: float,
    lexical: tuple[Sequence[int], Sequence[float]],
    semantic: tuple[Sequence[int], Sequence[float]],
) -> Ranking:
    """The ranking statement (RANKING) over both channels' candidates (ids, scores)."""
    sql = RANKING.format(
        julian_now=JULIANDAY.format(value="%(now)s::text"),
        julian_updated=JULIANDAY.format(value="d.updated_at"),
    )
    rows = conn.execute(
        sql,
        {
            "mode": request.mode,
            "alpha": request.alpha,
            "lexical_ceiling": ceiling,
            "weak_share": WEAK_KEYWORD_SHARE,
            "rrf_k": request.rrf_k,
            "depth": request.depth,
            "limit": request.limit,
            "half_life": request.half_life_days,
            "now": request.now or None,
            "lexical_ids": bigint_array_literal(lexical[0]),
            "lexical_scores": float8_array_literal(lexical[1]),
            "semantic_ids": bigint_array_literal(semantic[0]),
            "semantic_scores": float8_array_literal(semantic[1]),
            "searched_stores": sorted(request.searched_stores),
        },
    ).fetchall()
    if not rows:
        return Ranking([], 0, 0, 0)
    return Ranking(
        rows=[RankedRow(*row[:22], row[25]) for row in rows],
        fused_count=rows[0][22],
        lexical_found=rows[0][23],
        semantic_found=rows[0][24],
    )


@dataclass(frozen=True)
class _Prelude:
    """What the first statement read (PRELUDE)."""

    searched_rows: int
    has_hnsw: bool
    totals: tuple[int, int]  # the readable stores' indexed rows and tokens
    token_rows: dict[str, int]  # single tokens' rows in the readable stores
    scope: ScopeRuns | None


def prelude(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    phrases: Sequence[Phrase],
    scope: ScopeQuery | None,
) -> _Prelude:
    params: dict[str, Any] = {
        "ef_search": str(hnsw_ef_search(request.depth)),
        "searched_stores": sorted(request.searched_stores),
        "readable_stores": sorted(set(request.readable_stores)),
        "stats_tokens": keyword.single_tokens(phrases),
    }
    sql = PRELUDE.format(
        ctes="" if scope is None else f"WITH {scope.ctes}",
        settings=SEARCH_SETTINGS,
        scope_columns=NO_SCOPE_COLUMNS if scope is None else scope.columns,
    )
    if scope is not None:
        params.update(scope.params)
    # Prepared as psycopg does (the scope statement always was): a scope's plan is index
    # ranges and lookups whatever its values, and its planning was half its time at 0.1%.
    row = conn.execute(sql, params).fetchone()
    searched_rows, has_hnsw, totals, tokens, token_rows, *runs = row[3:]
    token_counts: dict[str, int] = {}
    for token, rows in zip(tokens or [], token_rows or [], strict=True):
        token_counts[token] = token_counts.get(token, 0) + int(rows)  # a row per store
    return _Prelude(
        int(searched_rows),
        bool(has_hnsw),
        (int(totals[0]), int(totals[1])),
        token_counts,
        None if scope is None else runs_of_rows(*runs),
    )


def bigint_array_literal(ids: Sequence[int] | np.ndarray) -> str:
    """PostgreSQL's text form of a bigint array, `{1,2,3}` (cast by `::bigint[]` in the SQL).
    A scope of 10k chunk ids as a Python list costs psycopg ~3 ms of per-element dumping under
    no load (~70 ms on a loaded machine); one string costs a join."""
    return "{" + ",".join(map(str, np.asarray(ids, dtype=np.int64).tolist())) + "}"


def float8_array_literal(values: Sequence[float]) -> str:
    """PostgreSQL's text form of a float8 array (cast by `::float8[]` in the SQL): each value
    as its shortest repr, which PostgreSQL reads back to the same double (as psycopg writes a
    float). The ranking's 200 candidates' ids and scores as lists cost psycopg ~1 ms of
    per-element dumping per search on a loaded machine; strings cost a join."""
    return "{" + ",".join(map(repr, map(float, values))) + "}"


def hnsw_ef_search(depth: int) -> int:
    """The HNSW search's breadth for a search of this depth (its pool is as large)."""
    return min(HNSW_EF_SEARCH_MAX, max(HNSW_EF_SEARCH, depth + 1 + TIE_MARGIN))


# ---------------------------------------------------------------- plans


def choose_lexical_plan(
    scoped: bool, searched_rows: int, kept_rows: Sequence[int], depth: int
) -> str:
    """ "postings": every posting of the kept phrases in the scope; "bounded": each kept token's
    best postings as candidates, for a large unscoped search (where the vector channel uses the
    HNSW index) whose kept tokens have more than BOUNDED_MIN_POSTINGS postings, one of them more
    than the depth (so the kept terms alone find more rows than the depth: the stop-word
    pruning never falls back to every term). `kept_rows`: each kept token's rows."""
    if (
        not scoped
        and searched_rows > VECTOR_EXACT_MAX_ROWS
        and sum(kept_rows) > BOUNDED_MIN_POSTINGS
        and max(kept_rows, default=0) > depth
    ):
        return "bounded"
    return "postings"


def choose_token_reads(
    scope: ScopeRuns | None, postings: int, tokens: int, indexed_rows: int
) -> str:
    """How the exact plan reads the postings of the query's single-token phrases: every posting
    of each token ("searched", unscoped), or for a scope whichever reads least of each token's
    postings in each run of the scope ("scope_ranges"), each token's every posting joined to the
    scope ("scope_tokens") and each scope chunk's ("scope_chunks"). `postings`: the `tokens`
    kept tokens' rows among `indexed_rows` rows (the readable set's, which hold the scope's);
    the scope's share of them is estimated from its share of the rows."""
    if scope is None:
        return "searched"
    in_scope = postings * scope.rows / max(indexed_rows, 1)
    costs = {
        "scope_ranges": tokens * scope.runs * RANGE_READ_POSTINGS + in_scope,
        "scope_chunks": scope.rows * CHUNK_READ_POSTINGS,
        "scope_tokens": postings,
    }
    return min(costs, key=lambda reads: costs[reads])


def choose_vector_plan(scoped: bool, searched_rows: int, has_hnsw: bool) -> str:
    """ "exact": every row of the scope by `<=>`; "hnsw": the HNSW index with iterative scans,
    for an unscoped search over more than VECTOR_EXACT_MAX_ROWS chunks."""
    if not scoped and has_hnsw and searched_rows > VECTOR_EXACT_MAX_ROWS:
        return "hnsw"
    return "exact"


# ---------------------------------------------------------------- keyword channel


def _phrases(request: RankRequest) -> list[Phrase]:
    """The query's phrases that have index tokens."""
    phrases: list[Phrase] = [(term, keyword.query_tokens(term)) for term in request.terms]
    return [(term, tokens) for term, tokens in phrases if tokens]


@dataclass(frozen=True)
class LexicalPlan:
    """The keyword channel's decisions for one search, made once over every searched store:
    the statistics, hybrid's keyword scale, the kept and dropped phrases, the plan, and what
    the reads' costs are estimated from (each kept single token's rows, among `indexed_rows`)."""

    strategy: str | None
    ceiling: float = 0.0
    stats: KeywordStats | None = None  # None: the channel reads nothing
    kept: tuple[Phrase, ...] = ()
    dropped: tuple[Phrase, ...] = ()
    bounded: bool = False
    kept_rows: tuple[int, ...] = ()
    indexed_rows: int = 0


def lexical_plan(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    phrases: Sequence[Phrase],
    first: _Prelude,
    searched_rows: int,
) -> LexicalPlan:
    if not phrases:
        return LexicalPlan("postings")
    stores = sorted(set(request.readable_stores))
    stats = keyword.stats_of(conn, phrases, stores, first.totals, first.token_rows)
    # hybrid's keyword scale: the sum of the phrases' idf in query order (lexical/ceiling.py)
    ceiling = 0.0
    if request.mode == "hybrid" and stats.rows:
        for term, _ in phrases:
            ceiling += stats.idf(term)
    if stats.rows == 0:
        return LexicalPlan("postings", ceiling=ceiling)
    scoped = request.scope is not None
    unscoped = request.every_store and not scoped
    kept, dropped = keyword.prune(
        phrases, stats, None if unscoped else searched_rows, request.depth
    )
    kept_rows = [stats.containing[term] for term, tokens in kept if len(tokens) == 1]
    bounded = choose_lexical_plan(scoped, searched_rows, kept_rows, request.depth) == "bounded"
    return LexicalPlan(
        "postings_bounded" if bounded else "postings", ceiling, stats, tuple(kept),
        tuple(dropped), bounded, tuple(kept_rows), stats.rows if scoped else searched_rows,
    )  # fmt: skip


def lexical_sql(
    plan: LexicalPlan,
    request: RankRequest,
    phrases: Sequence[Phrase],
    *,
    every_list: bool = False,
) -> _Lexical:
    """The keyword channel's part of the channels statement for `request`'s stores and scope.
    `every_list`: both candidate lists when terms were dropped (LEXICAL_KEPT_AND_ALL_BODY), for
    a store of a search over several."""
    if plan.stats is None:
        return _Lexical(plan.strategy, ceiling=plan.ceiling)
    sql = _PhraseSql(plan.stats, phrases)
    contribution = CONTRIBUTION.replace("%(idf)s", "(%(idf)s::float8[])")
    if plan.bounded:
        sql.params["list_size"] = BOUNDED_LIST_SIZE
        sql.params["rescored"] = BOUNDED_RESCORED_PER_DEPTH * (request.depth + 1)
        ctes = LEXICAL_BOUNDED.format(lists=sql.lists(plan.kept), contribution=contribution)
        ctes += LEXICAL_KEPT.format(kept=sql.rows(plan.kept, "candidates", "kept"),
                                    contribution=contribution)  # fmt: skip
        return _Lexical(plan.strategy, ctes, LEXICAL_BODY, sql.params, plan.ceiling)
    reads = choose_token_reads(
        request.scope, sum(plan.kept_rows), len(plan.kept_rows), plan.indexed_rows
    )
    ctes = LEXICAL_KEPT.format(kept=sql.rows(plan.kept, reads, "kept"), contribution=contribution)
    body = LEXICAL_BODY
    if plan.dropped:
        ctes += LEXICAL_DROPPED.format(dropped=sql.rows(plan.dropped, reads, "dropped"),
                                       contribution=contribution)  # fmt: skip
        body = LEXICAL_KEPT_AND_ALL_BODY if every_list else LEXICAL_PRUNED_OR_ALL_BODY
    return _Lexical(plan.strategy, ctes, body, sql.params, plan.ceiling)


class _PhraseSql:
    """SQL of (phrase, chunk_id, length, f) rows for some of a query's phrases, and the
    parameters it needs (phrase numbers are 1-based: they index SQL arrays)."""

    def __init__(self, stats: KeywordStats, phrases: Sequence[Phrase]) -> None:
        self.number = {term: i + 1 for i, (term, _) in enumerate(phrases)}
        self.params: dict[str, Any] = {
            "idf": float8_array_literal([stats.idf(term) for term, _ in phrases]),
            **keyword.bm25_params(stats),
            **keyword.weight_params(),
        }

    def rows(self, selected: Sequence[Phrase], reads: str, group: str) -> str:
        """Every posting of `selected` in the rows `reads` says ("searched", "scope_ranges",
        "scope_tokens", "scope_chunks", "candidates"); multi-token phrases each by
        keyword.phrase_rows_sql."""
        parts = []
        singles = [(term, tokens[0]) for term, tokens in selected if len(tokens) == 1]
        if singles and reads in ("searched", "scope_tokens"):
            scoped = reads == "scope_tokens"
            postings = "\n    UNION ALL".join(
                self._token(term, token, with_store=scoped) for term, token in singles
            )
            parts.append(TOKENS_IN_SCOPE.format(postings=postings) if scoped else postings)
        elif singles:
            names, numbers = f"{group}_tokens", f"{group}_phrases"
            self.params[names] = [token for _, token in singles]
            self.params[numbers] = [self.number[term] for term, _ in singles]
            if reads == "scope_ranges":
                parts.append(TOKENS_IN_RANGES.format(f=POSTING_F, tokens=names, phrases=numbers))
            else:
                rows, column = (("scope_chunk", "id") if reads == "scope_chunks"
                                else ("lexical_candidate", "chunk_id"))  # fmt: skip
                parts.append(TOKENS_OF_ROWS.format(f=POSTING_F, rows=rows, id=column,
                                                   tokens=names, phrases=numbers))  # fmt: skip
        phrase_rows = {"scope_tokens": "scope", "scope_chunks": "scope",
                       "scope_ranges": "scope"}.get(reads, reads)  # fmt: skip
        for term, tokens in selected:
            if len(tokens) > 1:
                sql, token_params = keyword.phrase_rows_sql(tokens, phrase_rows, self.number[term])
                parts.append(sql)
                self.params.update(token_params)
        return "\n    UNION ALL".join(parts)

    def lists(self, selected: Sequence[Phrase]) -> str:
        """The bounded plan's candidates: each single token's best postings per searched store,
        and every row of each multi-token phrase."""
        parts = []
        for term, tokens in selected:
            if len(tokens) == 1:
                name = f"l{self.number[term]}"
                parts.append(TOKEN_LIST.format(number=self.number[term], token=name, f=POSTING_F))
                self.params[name] = tokens[0]
            else:
                sql, token_params = keyword.phrase_rows_sql(
                    tokens, "searched", self.number[term], with_store=True
                )
                parts.append(sql)
                self.params.update(token_params)
        return "\n    UNION ALL".join(parts)

    def _token(self, term: str, token: str, *, with_store: bool = False) -> str:
        name = f"s{self.number[term]}"
        self.params[name] = token
        return TOKEN_POSTINGS.format(
            number=self.number[term], token=name, f=POSTING_F,
            store=POSTING_STORE if with_store else "",
        )  # fmt: skip


# ---------------------------------------------------------------- vector channel


def semantic_sql(request: RankRequest, searched_rows: int, has_hnsw: bool) -> _Semantic:
    if request.query_vector is None:
        return _Semantic(None)
    scoped = request.scope is not None
    strategy = choose_vector_plan(scoped, searched_rows, has_hnsw)
    pool_size = request.depth + 1 + TIE_MARGIN
    if strategy == "hnsw":
        pool_size = max(pool_size, hnsw_ef_search(request.depth))  # SEARCH_SETTINGS' breadth
        body = HNSW_POOL
    else:
        body = EXACT_POOL if scoped else EXACT_UNSCOPED_POOL
    query = np.ascontiguousarray(request.query_vector, dtype="<f4")
    params = {
        "query_vector": Float32Vector(query.tobytes()),
        "min_similarity": request.min_similarity,
        "floor_exempt": bigint_array_literal([int(i) for i in request.floor_exempt]),
        "floor_slack": FLOOR_SLACK,
        "pool_size": pool_size,
    }
    return _Semantic(f"pg_{strategy}", body.format(floor=POOL_FLOOR), params)


def best_of_pool(
    pool: Sequence[tuple[int, bytes]], request: RankRequest
) -> tuple[list[int], list[float]]:
    """The pool's rows that pass the floor (or are exempt), by exact similarity desc then id,
    at most depth + 1 (as SQLite's semantic candidates)."""
    if not pool or request.query_vector is None:
        return [], []
    unique = {int(row[0]): row[1] for row in pool}  # a row both parts of an HNSW pool found
    ids = np.fromiter(unique, dtype=np.int64, count=len(unique))
    vectors = np.frombuffer(b"".join(unique.values()), dtype="<f4").reshape(len(unique), -1)
    similarity = sqlite_vec_similarity(vectors, request.query_vector)
    if request.min_similarity is not None:
        exempt = np.isin(ids, np.asarray(list(request.floor_exempt), dtype=np.int64))
        keep = (similarity >= request.min_similarity) | exempt
        ids, similarity = ids[keep], similarity[keep]
    order = np.lexsort((ids, -similarity))[: request.depth + 1]
    return ids[order].tolist(), similarity[order].tolist()


def sqlite_vec_similarity(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """1 - sqlite-vec's vec_distance_cosine(row, query) for each row, operation for operation:
    float32 products (IEEE-rounded, as C multiplies two floats) summed in float32 in dimension
    order (`cumsum` accumulates sequentially; `sum` and BLAS would not), the magnitudes' square
    roots and the division in double, the distance rounded to float32 (its return type), then
    1 - distance in double. A zero vector has no distance (SQLite: NULL), scored 0."""
    a = np.ascontiguousarray(rows, dtype=np.float32)
    b = np.ascontiguousarray(query, dtype=np.float32)
    dot = np.cumsum(a * b, axis=1, dtype=np.float32)[:, -1].astype(np.float64)
    a_mag = np.cumsum(a * a, axis=1, dtype=np.float32)[:, -1].astype(np.float64)
    b_mag = np.float64(np.cumsum(b * b, dtype=np.float32)[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = np.sqrt(a_mag) * np.sqrt(b_mag)
        distance = (1.0 - dot / denominator).astype(np.float32).astype(np.float64)
    return np.where(denominator == 0.0, 0.0, 1.0 - distance)


def keyword_stats_for(
    conn: psycopg.Connection[Any], terms: Sequence[str], stores: Sequence[int]
) -> KeywordStats:
    """The statistics a search over `stores` (readable) scores `terms` with (for tests/tools)."""
    phrases = [(term, keyword.query_tokens(term)) for term in terms]
    return keyword.keyword_stats(conn, [p for p in phrases if p[1]], stores)
