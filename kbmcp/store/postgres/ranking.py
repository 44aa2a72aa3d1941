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

One module per statement, `rank` here the order they run in: prelude.py (1), channels.py (2,
with keyword_channel.py and vector_channel.py writing its two parts, and halves.py running
them on two connections for a large scope), vector_channel.py's `best_of_pool` (3),
ranking_statement.py (4); plan_choice.py chooses the channels' plans from the sizes the first
statement read, and rank_request.py holds the values passed between them.

The channels and their plans (reported as the search's strategies):
- keyword, "postings": FTS5's bm25 from every posting of the kept phrases in the scope
  (keyword.py), summed in query order; the stop-word pruning of fts.py with its fallback to
  every term inside the statement. The postings are read by token, or by scope chunk when the
  scope is small against them (plan_choice.py's `choose_token_reads`); same rows, same scores.
- keyword, "postings_bounded": a large unscoped search (where the vector channel uses the HNSW
  index) takes each kept token's best postings by impact as candidates and scores the best of
  them exactly with every kept phrase: approximate in which rows are candidates, exact in their
  scores (plan_choice.py's `choose_lexical_plan`).
- vector, "pg_exact": the scope's rows nearest by pgvector's cosine `<=>`; "pg_hnsw": for a
  large unscoped search the HNSW index with iterative scans, plus the keyword channel's
  candidates (a row both channels rank high is then never lost by the approximate index)
  (plan_choice.py's `choose_vector_plan`). Either way each pool row's similarity is then
  computed as sqlite-vec computes it (float32 sums in dimension order, vector_channel.py's
  `sqlite_vec_similarity`), so both backends give the same floats:
  pgvector sums in another order (its loops are vectorised), and its distances differ from
  sqlite-vec's in the last float32 bits, which would move scores across the 6-decimal rounding
  of outputs. The exact pool is the depth plus TIE_MARGIN rows, so a near-tie at the cut is
  decided by the exact scores. (Scoring the pool in SQL, as a first version did, cost ~70 us a
  row: most of a small scope's search.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from kbmcp.store.postgres import citus, connection
from kbmcp.store.postgres.channels import LEXICAL, SEMANTIC, channel_rows
from kbmcp.store.postgres.keyword_channel import LexicalSql, lexical_plan, lexical_sql, phrases_of
from kbmcp.store.postgres.prelude import prelude, searched_size
from kbmcp.store.postgres.rank_request import PgRanking, RankRequest
from kbmcp.store.postgres.ranking_statement import rank_candidates
from kbmcp.store.postgres.scope import ScopeQuery
from kbmcp.store.postgres.vector_channel import best_of_pool, hnsw_ef_search, semantic_sql


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
        lexical = LexicalSql(None)
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
