"""The vector channel of a PostgreSQL search: the pool statement and its exact scores.

The pool is the scope's rows nearest by pgvector's cosine `<=>` (an exact scan, or the HNSW
index for a large unscoped search: plan_choice.py), with their vectors; each pool row's
similarity is then computed here as sqlite-vec computes it (`sqlite_vec_similarity`), and the
best depth + 1 kept (`best_of_pool`), so both backends give the same floats (ranking.py's
module docstring).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbmcp.store.postgres import plan_choice
from kbmcp.store.postgres.array_literals import bigint_array_literal
from kbmcp.store.postgres.rank_request import RankRequest
from kbmcp.store.postgres.vectors import Float32Vector

TIE_MARGIN = 32  # pool rows beyond the depth (ranking.py's module docstring)
# A pool row may pass the floor by pgvector's distance and fail it by the exact one, never the
# reverse: the pool's floor is lowered by more than their largest difference (~1e-7).
FLOOR_SLACK = 1e-5
HNSW_EF_SEARCH_MAX = 1000  # pgvector's bound
# The HNSW search's breadth (pgvector's default is 40); the pool is as large (its rows are
# cheap to score exactly): recall against cost, bench/search.py.
HNSW_EF_SEARCH = 400

NO_SEMANTIC = "SELECT NULL::bigint, NULL::vector, NULL::float8 WHERE false"

# The pool: the nearest rows by pgvector's cosine distance, with their vectors. A row may pass
# the floor by pgvector's distance and fail it by the exact one, never the reverse: the pool's
# floor is lowered by FLOOR_SLACK.
POOL_FLOOR = """(%(min_similarity)s::float8 IS NULL
           OR 1.0::float8 - (v.embedding <=> %(query_vector)b::vector)
              >= %(min_similarity)s::float8 - %(floor_slack)s::float8
           OR v.chunk_id = ANY(%(floor_exempt)s::bigint[]))"""
# The exact order is written so that no index can serve it (the planner would otherwise take
# the approximate index for an "exact" scan). A scope's rows are read run by run, each a range
# of the primary key (OFFSET 0: a range scan per run). The rows are ranked without their
# vectors (a top-N sort copies each row it is given: 1.5 KB a row at 384 dimensions, 15 MB for
# 10,000 rows) and the kept rows' vectors read again by primary key (EXACT_POOL_VECTORS): the
# vector half of a 10% scope of the 100k bench took 6.3 ms instead of 6.9 (the statement for
# a query of bench/search.py's 10% scope, median of 150 alternated runs).
EXACT_POOL_RANKED = """
        SELECT v.chunk_id, v.knowledge_base_id,
               1.0::float8 - (v.embedding <=> %(query_vector)b::vector) AS similarity
        FROM scope_range AS r
        CROSS JOIN LATERAL (
            SELECT v.chunk_id, v.knowledge_base_id, v.embedding
            FROM chunk_vec AS v
            WHERE v.chunk_id BETWEEN r.lo AND r.hi
              AND v.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
            OFFSET 0) AS v
        WHERE {floor}
        ORDER BY 3 DESC, v.chunk_id
        LIMIT %(pool_size)s"""
# A search of whole stores: their rows through chunk_vec_by_store (migration 6) when they are
# few, a scan of the table when they are most of it; never every tenant's rows for a few.
EXACT_UNSCOPED_POOL_RANKED = """
        SELECT v.chunk_id, v.knowledge_base_id,
               1.0::float8 - (v.embedding <=> %(query_vector)b::vector) AS similarity
        FROM chunk_vec AS v
        WHERE v.knowledge_base_id = ANY(%(searched_stores)s::bigint[]) AND {floor}
        ORDER BY 3 DESC, v.chunk_id
        LIMIT %(pool_size)s"""
# The ranked rows with their vectors. The store is named again for Citus's routing (the note
# on ranking_statement.py's RANKING).
EXACT_POOL_VECTORS = """
    SELECT best.chunk_id, v.embedding, best.similarity
    FROM ({ranked}) AS best
    JOIN chunk_vec AS v
      ON v.chunk_id = best.chunk_id AND v.knowledge_base_id = best.knowledge_base_id
     AND v.knowledge_base_id = ANY(%(searched_stores)s::bigint[])"""
EXACT_POOL = EXACT_POOL_VECTORS.format(ranked=EXACT_POOL_RANKED)
EXACT_UNSCOPED_POOL = EXACT_POOL_VECTORS.format(ranked=EXACT_UNSCOPED_POOL_RANKED)
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


@dataclass(frozen=True)
class SemanticSql:
    """The vector channel's part of the channels statement."""

    strategy: str | None
    body: str = NO_SEMANTIC
    params: dict[str, Any] | None = None


def hnsw_ef_search(depth: int) -> int:
    """The HNSW search's breadth for a search of this depth (its pool is as large)."""
    return min(HNSW_EF_SEARCH_MAX, max(HNSW_EF_SEARCH, depth + 1 + TIE_MARGIN))


def semantic_sql(request: RankRequest, searched_rows: int, has_hnsw: bool) -> SemanticSql:
    if request.query_vector is None:
        return SemanticSql(None)
    scoped = request.scope is not None
    strategy = plan_choice.choose_vector_plan(scoped, searched_rows, has_hnsw)
    pool_size = request.depth + 1 + TIE_MARGIN
    if strategy == "hnsw":
        # the breadth prelude.py's SEARCH_SETTINGS gave the HNSW search
        pool_size = max(pool_size, hnsw_ef_search(request.depth))
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
    return SemanticSql(f"pg_{strategy}", body.format(floor=POOL_FLOOR), params)


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
