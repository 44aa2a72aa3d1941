"""The vector channel without the in-memory copy: candidates from SQL, for one-shot processes.

Why: the vector cache (vector_cache.py) costs ~1.7 s and ~1 GB of peak memory to fill at 100k
chunks, which a server repays over many queries but a one-shot `kbmcp search` pays for one.
Here SQL picks the nearest candidates and only those few vectors are read into numpy:

- scopes up to EXACT_MAX_ROWS chunks: `vec_distance_cosine` over exactly the allowed rows of
  `chunk_vector` (~3 us a row; 100 rows 0.3 ms);
- larger scopes and unscoped searches: the vec0 KNN over `chunk_vec` (an exact brute-force scan,
  ~60-90 ms at 100k whatever the scope), the allow-list as `rowid IN carray(:allowed)`, which
  vec0 applies before k (docs: stack facts), so the scope still applies before the limit.

Same results as the cache: the candidates' vectors are re-scored exactly as the cache scores
them (vector_cache.build_vectors and .similarities), so similarities are the same floats; SQL's
own float32 distances only choose the candidates. That choice is checked: if the depth-th best
re-scored similarity is not clearly above every row SQL left out, the pool is doubled.
"""

from __future__ import annotations

import apsw
import numpy as np

from kbmcp.search.vector_cache import build_vectors, similarities

EXACT_MAX_ROWS = 20_000  # above this, vec0's whole-corpus scan is cheaper than ~3 us a row
KNN_MAX_K = 4096  # sqlite-vec's cap on k
POOL_MARGIN = 16  # candidates beyond the depth, so rounding near the cut cannot lose a row
# Float32 distances from SQL and numpy's re-scored similarities differ by a few ulps (~1e-7);
# a candidate pool is complete when its depth-th best beats the best left-out row by more.
ROUNDING_SLACK = 1e-5

# The nearest allowed rows by cosine distance (1 - cosine), ties by id.
NEAREST_ALLOWED = """
SELECT chunk_id, vec_distance_cosine(embedding, :query) AS distance
FROM chunk_vector
WHERE chunk_id IN carray(:allowed)
ORDER BY distance, chunk_id
LIMIT :k
"""
# vec0 KNN over the indexed (published) chunks; `rowid IN carray(...)` is applied before k, a
# JOIN or a single-id `=` would be applied after it (silently short results). vec0 accepts only
# `ORDER BY distance`; the order among equal distances does not matter (the pool is re-sorted).
NEAREST_INDEXED = """
SELECT rowid, distance
FROM chunk_vec
WHERE embedding MATCH :query AND k = :k {allowed}
ORDER BY distance
"""
ALLOWED = "AND rowid IN carray(:allowed)"
SELECT_VECTORS = "SELECT chunk_id, embedding FROM chunk_vector WHERE chunk_id IN carray(:ids)"


def nearest_sql(
    conn: apsw.Connection, query: np.ndarray, allowed: np.ndarray | None, depth: int
) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(chunk ids, similarities, strategy) of a pool of the nearest allowed chunks that holds
    the `depth` best and everything tied with them, scored like the vector cache; strategy is
    "exact" (scan of the allowed rows) or "index" (vec0). None if vec0 would need k > 4096."""
    exact = allowed is not None and len(allowed) <= EXACT_MAX_ROWS
    k = depth + POOL_MARGIN
    blob = np.ascontiguousarray(query, dtype=np.float32).tobytes()
    while True:
        if not exact and k > KNN_MAX_K:
            return None
        rows = _nearest(conn, blob, allowed, k, exact)
        ids, similarities = _rescored(conn, [row[0] for row in rows], query)
        complete = len(rows) < k or (
            len(similarities) >= depth
            and np.sort(similarities)[-depth] > 1.0 - rows[-1][1] + ROUNDING_SLACK
        )
        if complete:
            return ids, similarities, "exact" if exact else "index"
        k *= 2


def _nearest(
    conn: apsw.Connection, blob: bytes, allowed: np.ndarray | None, k: int, exact: bool
) -> list[tuple[int, float]]:
    params: dict[str, object] = {"query": blob, "k": k}
    if allowed is not None:
        params["allowed"] = apsw.carray(allowed)
    if exact:
        sql = NEAREST_ALLOWED
    else:
        sql = NEAREST_INDEXED.format(allowed=ALLOWED if allowed is not None else "")
    return [(int(i), float(d)) for i, d in conn.execute(sql, params).fetchall()]


def _rescored(
    conn: apsw.Connection, chunk_ids: list[int], query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    if not chunk_ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    ids = np.asarray(chunk_ids, dtype=np.int64)
    vectors = build_vectors(conn.execute(SELECT_VECTORS, {"ids": apsw.carray(ids)}).fetchall())
    rows = np.arange(len(vectors.ids), dtype=np.intp)
    return vectors.ids, similarities(vectors.matrix, rows, query)
