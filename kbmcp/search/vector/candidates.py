"""Accelerated vector candidates: cosine similarity from the in-memory matrix (matrix.py).

Two strategies (search/plan.py picks one by the size of the scope):

- "matrix_exact": the allowed rows are gathered and scored with one matrix-vector product:
  brute force over exactly the scope, recall 1.0 by construction, cost proportional to the
  scope, not the corpus.
- "sign_bits": larger scopes and unscoped searches. A Hamming scan over the rows' packed sign
  bits picks a pool of the nearest allowed rows, which are re-scored exactly. The scope applies
  before the coarse top-k, so it still applies before the limit. The pool is the largest of
  POOL_MIN, POOL_PER_CANDIDATE per requested candidate and POOL_FRACTION of the allowed rows:
  on SciFact's 10,765 MiniLM chunk vectors (300 queries) a sign-bit shortlist of 1% of the rows
  gives recall@10 0.955, 2% 0.983, 5% 0.997 against brute force (docs/search.md).

Both return a pool: the best `count` rows by numpy's similarity and every row within
ROUNDING_SLACK of the last of them, which sqlite-vec then re-scores inside the ranking
statement (vector/sql.py, "pool_exact"), so similarities and near-tie order are the same as in
the plain path.
"""

from __future__ import annotations

import math

import numpy as np

from kbmcp.search.vector.matrix import VectorMatrix, sign_bits, similarities

POOL_MIN = 1000
POOL_PER_CANDIDATE = 10
POOL_FRACTION = 0.05
HAMMING_BLOCK = 8192
# numpy and sqlite-vec round float32 dot products differently by a few ulps (~1e-7): a pool that
# keeps every row this close to its cut holds sqlite-vec's best `count` rows too.
ROUNDING_SLACK = 1e-5


def matrix_pool(
    vectors: VectorMatrix,
    query: np.ndarray,
    allowed: np.ndarray | None,
    count: int,
    min_similarity: float | None,
    coarse: bool,
) -> np.ndarray:
    """Chunk ids (ascending) of a pool that holds the best `count` allowed rows; `coarse`
    selects the sign-bit shortlist before exact scoring."""
    rows = vectors.live_rows() if allowed is None else vectors.rows_of(allowed)
    if coarse:
        pool = max(POOL_MIN, count * POOL_PER_CANDIDATE, math.ceil(POOL_FRACTION * len(rows)))
        rows = _coarse_rows(vectors, query, rows, pool, every_row=allowed is None)
    scores = similarities(vectors.matrix, rows, query)
    ids = vectors.ids[rows]
    if min_similarity is not None:
        keep = scores >= min_similarity - ROUNDING_SLACK
        ids, scores = ids[keep], scores[keep]
    if len(ids) > count:
        cut = np.partition(scores, len(scores) - count)[len(scores) - count]
        ids = ids[scores >= cut - ROUNDING_SLACK]
    return np.sort(ids)


def _coarse_rows(
    vectors: VectorMatrix, query: np.ndarray, rows: np.ndarray, pool: int, every_row: bool
) -> np.ndarray:
    """The `pool` rows nearest to the query in Hamming distance of sign bits."""
    if len(rows) <= pool:
        return rows
    query_bits = sign_bits(query.reshape(1, -1))[0]
    contiguous = every_row and len(rows) == len(vectors.ids)  # no dead rows: no gather needed
    distances = np.empty(len(rows), dtype=np.int32)
    for start in range(0, len(rows), HAMMING_BLOCK):
        stop = min(start + HAMMING_BLOCK, len(rows))
        bits = vectors.bits[start:stop] if contiguous else vectors.bits[rows[start:stop]]
        np.sum(np.bitwise_count(bits ^ query_bits), axis=1, dtype=np.int32,
               out=distances[start:stop])  # fmt: skip
    return rows[np.argpartition(distances, pool - 1)[:pool]]


def unit(vector: np.ndarray) -> np.ndarray | None:
    """The query as a float32 unit vector; None when it has no direction (a featureless query,
    e.g. only punctuation for the hashing embedder)."""
    query = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(query))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return query / np.float32(norm)
