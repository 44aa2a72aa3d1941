"""The vector channel in SQL: cosine similarity with sqlite-vec, inside the scope.

The plain path's semantic source for the ranking statement (search/ranking.py), used by
processes without accelerators (a one-shot `kbmcp search`): the in-memory matrix costs ~0.35 s
and ~150 MB to build at 100k chunks, which a server repays over many queries and a single query
does not. Two strategies (search/plan.py picks one by the size of the scope):

- "sql_exact": `vec_distance_cosine` over exactly the scope's rows of `chunk_vector`
  (~3 us a row; 100 rows 0.3 ms): cost proportional to the scope.
- "vec0_knn": the vec0 KNN over `chunk_vec` (an exact brute-force scan, ~60-90 ms at 100k
  whatever the scope). The scope is `rowid IN (SELECT ...)`, which vec0 applies before k; a JOIN
  or a single-id `=` would be applied after it (silently short results). Used only when the
  file's vec0 tables are not the layout that vector/vec0_scan.py reads (the plan's "vec0_scan"
  scores the same rows with numpy and hands a pool to `pool_source`).

Similarity is 1 - cosine distance, always computed by sqlite-vec, also for the accelerated
path: the in-memory matrix only picks a pool of rows (vector/candidates.py) that this SQL
re-scores ("pool_exact"). numpy and sqlite-vec may round a float32 dot product differently in
the last bit, and near-ties at the candidate cut (common with repeated text) would otherwise
order differently in a one-shot CLI search and in the server. sqlite-vec returns NULL for a zero
vector, whose similarity is 0.
"""

from __future__ import annotations

from typing import Any

import apsw
import numpy as np

from kbmcp.search.resolved import SimilarityFloor
from kbmcp.store.sqlite.search.ranking import ChannelSource

KNN_MAX_K = 4096  # sqlite-vec's cap on k (the depth is at most 1000)
KNN_TIE_MARGIN = 32

# {rows}: the scope's chunks, or the pool an accelerator picked. The floor spares the chunks in
# :floor_exempt (search/floor.py; '[]' for none).
EXACT = """
    SELECT chunk_id, score FROM (
        SELECT v.chunk_id,
               1.0 - coalesce(vec_distance_cosine(v.embedding, :query_vector), 1.0) AS score
        FROM chunk_vector AS v
        WHERE v.chunk_id IN ({rows}))
    WHERE :min_similarity IS NULL OR score >= :min_similarity
       OR chunk_id IN (SELECT value FROM json_each(:floor_exempt))
    ORDER BY score DESC, chunk_id
    LIMIT :depth + 1"""

# The :knn_k nearest first, then the floor: the rows above a similarity floor that are nearest
# are the nearest rows that pass it, so filtering after k loses nothing. (Not so when the floor
# spares some rows: a spared row below the floor may lie beyond k; `sql_source` then scores the
# scope exactly.) k goes KNN_TIE_MARGIN
# past the depth because vec0 returns an arbitrary subset of rows tied at its k-th distance
# (repeated text has identical vectors); the ORDER BY then cuts the ties by chunk id, as the
# other strategies do. A tie of more than KNN_TIE_MARGIN rows at the cut can still resolve
# differently from the server's. The margin costs: k = 101 -> 57 ms, 133 -> ~62 ms, 357 -> 95 ms
# at 100k chunks.
KNN = """
    SELECT chunk_id, score FROM (
        SELECT rowid AS chunk_id, 1.0 - coalesce(distance, 1.0) AS score
        FROM chunk_vec
        WHERE embedding MATCH :query_vector AND k = :knn_k {in_scope})
    WHERE :min_similarity IS NULL OR score >= :min_similarity
    ORDER BY score DESC, chunk_id
    LIMIT :depth + 1"""
IN_SCOPE = "AND rowid IN (SELECT id FROM scope_chunk)"
SCOPE_ROWS = "SELECT id FROM scope_chunk"
POOL_ROWS = "SELECT value FROM carray(:semantic_pool)"
VECTOR_INDEX_EXISTS = "SELECT 1 FROM sqlite_schema WHERE name = 'chunk_vec'"


def sql_source(
    strategy: str, query: np.ndarray, scoped: bool, floor: SimilarityFloor, depth: int
) -> ChannelSource:
    """The semantic channel as sqlite-vec SQL; strategy "sql_exact" (needs a scope) or
    "vec0_knn"."""
    params = _params(query, floor)
    if floor.exempt is not None and scoped:
        strategy = "sql_exact"  # see KNN
    if strategy == "sql_exact":
        return ChannelSource(strategy, EXACT.format(rows=SCOPE_ROWS), params)
    params["knn_k"] = min(KNN_MAX_K, depth + 1 + KNN_TIE_MARGIN)
    return ChannelSource(strategy, KNN.format(in_scope=IN_SCOPE if scoped else ""), params)


def pool_source(
    strategy: str,
    query: np.ndarray,
    pool: np.ndarray,
    floor: SimilarityFloor,
    found: int | None = None,
) -> ChannelSource:
    """Exact sqlite-vec scores of a pool of chunk ids an accelerator picked (`found`: see
    `ChannelSource`)."""
    if len(pool) == 0:
        return ChannelSource(strategy)
    params = {**_params(query, floor), "semantic_pool": apsw.carray(pool)}
    return ChannelSource(strategy, EXACT.format(rows=POOL_ROWS), params, found=found)


def _params(query: np.ndarray, floor: SimilarityFloor) -> dict[str, Any]:
    return {
        "query_vector": np.ascontiguousarray(query, dtype=np.float32).tobytes(),
        "min_similarity": floor.value,
        "floor_exempt": floor.exempt_json(),
    }


def has_vector_index(conn: apsw.Connection) -> bool:
    """Whether the file has its vec0 index (created when a model is first recorded)."""
    return conn.execute(VECTOR_INDEX_EXISTS).fetchone() is not None
