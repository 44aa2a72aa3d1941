"""The channels statement of a PostgreSQL search (CHANNELS): the scope, the keyword channel's
candidates and the vector channel's pool in one statement, or for a large scope its two halves
on two connections of one snapshot (halves.py).
"""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.store.postgres import halves
from kbmcp.store.postgres.array_literals import bigint_array_literal
from kbmcp.store.postgres.keyword_channel import LexicalSql
from kbmcp.store.postgres.rank_request import RankRequest
from kbmcp.store.postgres.vector_channel import SemanticSql

# Statements whose plans depend on their parameters (the channels statement, a phrase's
# count) are sent unprepared (`prepare=False`), so each is planned for its
# own: psycopg prepares a statement run 5 times on a connection, and PostgreSQL may then plan it
# once for any parameters - with no row estimate for a token and a scope array that is no longer
# a constant. The ranking statement's plan does not (about 200 candidates joined by primary
# keys): it is prepared, and PostgreSQL keeps one plan for it when that is no worse (its planning
# was ~1 ms a search, a third of its time at small scopes).

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


def channel_rows(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    lexical: LexicalSql,
    semantic: SemanticSql,
    *,
    kept_count: bool = False,
) -> list[tuple[Any, ...]]:
    """The channels statement's rows (CHANNELS) over `request.searched_stores` and its scope;
    `kept_count`: with the KEPT_COUNT row (a store of a search over several). One statement,
    or for a large scope with both channels its two halves on two connections of one snapshot
    (halves.py, where the server can share a snapshot)."""
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
    if not halves.worth_two(conn, scope_rows, both):
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
