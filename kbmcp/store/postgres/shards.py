"""A search over several stores on Citus: the channels statement store by store, merged here.

On one PostgreSQL server a search is ranking.py's few statements over every searched store at
once. On a Citus cluster a statement reading one store's rows runs whole on the store's shard
(a router query: every table it reads is distributed by the store and filtered on it, so Citus
sends it to one node as it is). A statement reading several shards is planned by Citus piece
by piece, and the channels statement's pieces do not all fit that: a LATERAL subquery with
LIMIT or OFFSET over a list of values, or an aggregate over a CTE, cannot be pushed down, and
what can be would send every posting of the query's tokens to the coordinator. So here:

1. the keyword statistics of the readable stores (prelude.py's first statement without the
   scope: sums of per-store rows, which Citus adds up across shards);
2. a filtered scope's runs, store by store (each a router query);
3. the keyword and vector decisions (pruning, plans) once, over every searched store, from the
   statistics and the scope's size, exactly as one server makes them;
4. the channels statement once per searched store (a router query each; up to STORE_LANES
   stores at once, on helper connections beside the search's), each returning the
   store's best depth + 1 keyword rows, the kept terms' and every term's when terms were pruned
   (with the kept terms' count: the fallback to every term is decided over every store), and
   its best pool rows with pgvector's similarity;
5. the merge: the best depth + 1 keyword rows over every store by (score desc, id), the best
   pool rows by (pgvector's similarity desc, id), then vector_channel.py's exact pool scoring
   and ranking_statement.py's statement, which reads the candidates' rows on their shards.

The best rows of a union are the best of each part's best rows, and the statements order rows
by the same keys, so this gives one server's ids, order and scores for the exact plans (every
scoped search, and unscoped ones over up to plan_choice.VECTOR_EXACT_MAX_ROWS chunks). The
approximate plans of large unscoped searches differ by construction: each shard has its own
HNSW graph, and the bounded keyword plan rescores each store's best candidates (a superset of
one server's); docs/scale-out.md says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from kbmcp.search.resolved import Scope
from kbmcp.store.postgres import (
    channels,
    citus,
    connection,
    halves,
    keyword_channel,
    prelude,
    ranking_statement,
    vector_channel,
)
from kbmcp.store.postgres.channels import KEPT_COUNT, LEXICAL, LEXICAL_ALL, SEMANTIC
from kbmcp.store.postgres.keyword_channel import LexicalPlan
from kbmcp.store.postgres.rank_request import PgRanking, RankRequest
from kbmcp.store.postgres.scope import ScopeRuns, runs_of, scope_runs

PgConnection = psycopg.Connection[Any]


def store_by_store(conn: PgConnection, request: RankRequest) -> bool:
    """Whether a search runs store by store: on Citus, over more than one store, or over
    fewer stores than the caller reads (a knowledge_base_ids filter). In the second case one
    statement would read the keyword statistics of every readable store beside the scope, a
    statement over several shards that Citus plans by pulling the scope's rows to the
    coordinator (113 ms for a store of 12,500 documents, against 39 ms store by store)."""
    searched = set(request.searched_stores)
    spans = len(searched) > 1 or searched != set(request.readable_stores)
    return spans and citus.is_citus(conn)


def rank(conn: PgConnection, request: RankRequest, scope: Scope | None) -> PgRanking:
    """ranking.rank's answer, computed store by store (the module docstring). `scope`: the
    search's filtered scope, None when it is every indexed chunk of the searched stores."""
    phrases = keyword_channel.phrases_of(request)
    stores = sorted(set(request.searched_stores))
    ef_search = vector_channel.hnsw_ef_search(request.depth)
    with connection.read_snapshot(conn):
        citus.set_search_settings(conn, ef_search)
        first = prelude.prelude(conn, request, phrases, None)
        if scope is not None:
            request = dataclasses.replace(request, scope=_runs(conn, scope, stores))
        searched_rows, has_hnsw = prelude.searched_size(request, first)
        plan = LexicalPlan(None)
        if request.lexical:
            plan = keyword_channel.lexical_plan(conn, request, phrases, first, searched_rows)
        semantic = vector_channel.semantic_sql(request, searched_rows, has_hnsw)
        targets = []
        for store in stores:
            runs = None if request.scope is None else request.scope.of_store(store)
            if runs is None or runs.runs:  # else nothing of the scope in this store
                targets.append(dataclasses.replace(request, searched_stores=[store], scope=runs))
        # Over several stores each statement returns both keyword lists and its kept terms'
        # count (the fallback to every term is decided over all of them, here); one store's
        # statement decides it itself, as one server's does, and reads every term's postings
        # only when it falls back.
        several = len(targets) > 1
        jobs: list[StoreJob] = [
            (one, keyword_channel.lexical_sql(plan, one, phrases, every_list=several), semantic)
            for one in targets
        ]
        found = _channel_rows_of_stores(conn, jobs, ef_search, kept_count=several)
        lexical_ids, lexical_scores = _best_keyword_rows(
            found, plan, request.depth, decided=not several
        )
        pool_size = int((semantic.params or {}).get("pool_size", 0))
        pool = _best_pool_rows(found, pool_size, exact=semantic.strategy != "pg_hnsw")
        semantic_ids, semantic_scores = vector_channel.best_of_pool(pool, request)
        ranked = ranking_statement.rank_candidates(
            conn, request, plan.ceiling, (lexical_ids, lexical_scores),
            (semantic_ids, semantic_scores),
        )  # fmt: skip
    scope_rows = None if request.scope is None else request.scope.rows
    return PgRanking(ranked, plan.strategy, semantic.strategy, plan.ceiling, scope_rows)


StoreJob = tuple[RankRequest, keyword_channel.LexicalSql, vector_channel.SemanticSql]
# The per-store channels statements run on this many connections at once: the search's own and
# helpers beside it (halves.run_beside), each taking every STORE_LANES-th store. Each statement is
# a router query to its store's worker, so the lanes' statements run on different nodes at
# once; one after another, a search over many stores took the sum of their times (the 1M table
# on the cluster, docs/scale-out.md). A helper's statements run in a read-only transaction of
# its own with the search's settings: on Citus every worker reads its own snapshot anyway (a
# coordinator's transaction is not one snapshot across nodes).
STORE_LANES = 4


def _channel_rows_of_stores(
    conn: PgConnection, jobs: Sequence[StoreJob], ef_search: int, *, kept_count: bool
) -> list[tuple[Any, ...]]:
    """The channels statement's rows of every job (a store each), on up to STORE_LANES
    connections at once, in the jobs' order (`kept_count`: with each store's KEPT_COUNT
    row)."""
    lanes = max(1, min(STORE_LANES, len(jobs))) if halves.can_open_helpers(conn) else 1

    def lane(lane_conn: PgConnection, first: int) -> list[tuple[int, list[tuple[Any, ...]]]]:
        return [(n, _channel_rows(lane_conn, jobs[n], kept_count))
                for n in range(first, len(jobs), lanes)]  # fmt: skip

    def helper_lane(first: int) -> Callable[[PgConnection], list[tuple[int, Any]]]:
        def run(helper: PgConnection) -> list[tuple[int, Any]]:
            helper.execute(halves.BEGIN_SHARED)
            citus.set_search_settings(helper, ef_search)
            done = lane(helper, first)
            helper.execute("COMMIT")
            return done

        return run

    mine, theirs = halves.run_beside(
        conn, lambda: lane(conn, 0), [helper_lane(first) for first in range(1, lanes)]
    )
    by_job = dict(mine + [done for rows in theirs for done in rows])
    return [row for n in range(len(jobs)) for row in by_job[n]]


def _channel_rows(conn: PgConnection, job: StoreJob, kept_count: bool) -> list[tuple[Any, ...]]:
    one, lexical, semantic = job
    return channels.channel_rows(conn, one, lexical, semantic, kept_count=kept_count)


def _runs(conn: PgConnection, scope: Scope, stores: Sequence[int]) -> ScopeRuns:
    """The scope's runs, read store by store (each statement on the store's shard)."""
    lo: list[int] = []
    hi: list[int] = []
    of: list[int] = []
    for store in stores:
        runs = scope_runs(conn, only_store(scope, store))
        assert runs is not None  # a filtered scope
        lo += runs.lo.tolist()
        hi += runs.hi.tolist()
        of += runs.store.tolist()
    return runs_of(lo, hi, stores=of)


def only_store(scope: Scope, store: int) -> Scope:
    """The part of a filtered scope in one store: its filters within that store alone."""
    return dataclasses.replace(
        scope,
        readable_kb_ids=[store] if store in (scope.readable_kb_ids or ()) else None,
        memory_store_ids=[store] if store in (scope.memory_store_ids or ()) else None,
    )


def _best_keyword_rows(
    found: Sequence[tuple[Any, ...]], plan: LexicalPlan, depth: int, *, decided: bool = False
) -> tuple[list[int], list[float]]:
    """The keyword candidates over every store: the kept terms' rows, or every term's when the
    kept terms find no more than `depth` rows in all (LEXICAL_PRUNED_OR_ALL_BODY's rule); the
    best depth + 1 by score desc, then id. `decided`: one store's statement chose the list
    itself (its rows are the chosen list's)."""
    kind = LEXICAL
    if plan.dropped and not decided:
        kept = sum(int(row[1]) for row in found if row[0] == KEPT_COUNT)
        kind = LEXICAL if kept > depth else LEXICAL_ALL
    rows = sorted(((row[1], row[2]) for row in found if row[0] == kind),
                  key=lambda row: (-row[1], row[0]))[: depth + 1]  # fmt: skip
    return [int(chunk_id) for chunk_id, _ in rows], [float(score) for _, score in rows]


def _best_pool_rows(
    found: Sequence[tuple[Any, ...]], pool_size: int, *, exact: bool
) -> list[tuple[int, bytes]]:
    """The vector pool over every store: for an exact plan the best `pool_size` rows by
    pgvector's similarity desc, then id (the pool statement's ORDER BY; PostgreSQL sorts NaN,
    a zero vector's similarity, above every number); for the HNSW plan every store's pool."""
    rows = [row for row in found if row[0] == SEMANTIC]
    if exact:
        rows = sorted(rows, key=_pool_order)[:pool_size]
    return [(int(row[1]), row[3]) for row in rows]


def _pool_order(row: tuple[Any, ...]) -> tuple[int, float, int]:
    similarity = float(row[2])
    if math.isnan(similarity):
        return (0, 0.0, int(row[1]))
    return (1, -similarity, int(row[1]))
