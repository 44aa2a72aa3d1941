"""The first statement of a PostgreSQL search (PRELUDE): its settings, the searched stores'
size, the keyword statistics' rows of the readable stores and a filtered scope's runs, in one
round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from kbmcp.store.postgres import keyword
from kbmcp.store.postgres.keyword import Phrase
from kbmcp.store.postgres.rank_request import RankRequest
from kbmcp.store.postgres.scope import ScopeQuery, ScopeRuns, runs_of_rows
from kbmcp.store.postgres.vector_channel import hnsw_ef_search

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
# the settings; the searched stores' indexed chunks (their keyword totals, store by store: the
# bounded keyword lists are sized by each store's own) and whether the HNSW
# index exists; the keyword statistics of the readable stores (keyword.py's STORE_TOTALS and
# TOKEN_ROWS); a filtered scope's runs (scope.py's SCOPE_RUN_CTES and SCOPE_RUN_COLUMNS).
PRELUDE = """{ctes}
SELECT {settings},
       (SELECT array_agg(ARRAY[knowledge_base_id, rows] ORDER BY knowledge_base_id)
        FROM keyword_total
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


@dataclass(frozen=True)
class Prelude:
    """What the first statement read (PRELUDE)."""

    store_rows: dict[int, int]  # each searched store's indexed chunks (a store without: none)
    has_hnsw: bool
    totals: tuple[int, int]  # the readable stores' indexed rows and tokens
    token_rows: dict[str, int]  # single tokens' rows in the readable stores
    scope: ScopeRuns | None

    @property
    def searched_rows(self) -> int:
        """The searched stores' indexed chunks."""
        return sum(self.store_rows.values())


def prelude(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    phrases: Sequence[Phrase],
    scope: ScopeQuery | None,
) -> Prelude:
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
    # Binary: a scope's arrays of ids are read as machine integers, not parsed from text.
    with conn.cursor(binary=True) as cursor:
        row = cursor.execute(sql, params).fetchone()
    store_rows, has_hnsw, totals, tokens, token_rows, *runs = row[3:]
    token_counts: dict[str, int] = {}
    for token, rows in zip(tokens or [], token_rows or [], strict=True):
        token_counts[token] = token_counts.get(token, 0) + int(rows)  # a row per store
    return Prelude(
        {int(store): int(rows) for store, rows in store_rows or []},
        bool(has_hnsw),
        (int(totals[0]), int(totals[1])),
        token_counts,
        None if scope is None else runs_of_rows(*runs),
    )


def searched_size(request: RankRequest, first: Prelude) -> tuple[int, bool]:
    """How many rows the channels search, and whether an HNSW index may serve them: a scope
    reads no index but its own rows."""
    if request.scope is not None:
        return request.scope.rows, False
    return first.searched_rows, first.has_hnsw
