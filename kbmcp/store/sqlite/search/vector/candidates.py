"""Accelerated vector candidates: a pool of the nearest allowed rows from the in-memory matrix.

Every allowed row is scored (brute force, recall 1.0 by construction): gathered in blocks for
a scope, BLAS matrix-vector products over contiguous blocks of the whole matrix for unscoped
searches (vector/matrix.py `all_similarities`; numpy's einsum loop was slower). A sign-bit
shortlist (Hamming distance, then exact re-scoring of 5% of the rows) was the large-scope
strategy until measured against a true brute-force reference: on the benchmark's word-vector
corpus it kept only 29% of the true top 10 at 100k chunks (0.997 on SciFact's MiniLM vectors),
too data-dependent for a search that promises exact filtered recall.

The result is a pool: the best `count` rows by numpy's similarity and every row within
ROUNDING_SLACK of the last of them, which sqlite-vec re-scores inside the ranking statement
(vector/sql.py), so similarities and near-tie order are the same as in the plain path.
"""

from __future__ import annotations

import numpy as np

from kbmcp.search.resolved import SimilarityFloor
from kbmcp.store.sqlite.search.vector.matrix import VectorMatrix, all_similarities, similarities

# numpy and sqlite-vec round float32 dot products differently by a few ulps (~1e-7): a pool that
# keeps every row this close to its cut holds sqlite-vec's best `count` rows too.
ROUNDING_SLACK = 1e-5
# A scope holding more than this share of the rows is scored by the one whole-matrix product and
# then picked: gathering costs ~0.16 us a row against ~0.065 for the whole product (100k-chunk
# bench, documents only beside 10k memories: 16 -> 7 ms).
FULL_PASS_FRACTION = 0.4


def matrix_pool(
    vectors: VectorMatrix,
    query: np.ndarray,
    allowed: np.ndarray | None,
    count: int,
    floor: SimilarityFloor,
) -> tuple[np.ndarray, int]:
    """Chunk ids (ascending) of a pool that holds the best `count` allowed rows, and how many
    allowed rows were scored (passing the floor, within the slack)."""
    if allowed is None:
        # One pass over the contiguous matrix (no gather), then only the live rows. BLAS may
        # round a row differently by its position in the block; the pool's slack and sqlite-vec's
        # re-scoring make that irrelevant.
        rows = vectors.live_rows()
        scores = all_similarities(vectors.matrix, query)[rows]
    else:
        rows = vectors.rows_of(allowed)
        if len(rows) > FULL_PASS_FRACTION * len(vectors.ids):
            scores = all_similarities(vectors.matrix, query)[rows]  # the same slack applies
        else:
            scores = similarities(vectors.matrix, rows, query)
    return best_pool(vectors.ids[rows], scores, count, floor)


def best_pool(
    ids: np.ndarray, scores: np.ndarray, count: int, floor: SimilarityFloor
) -> tuple[np.ndarray, int]:
    """Of rows scored by numpy: the ids (ascending) of the best `count` that pass the floor
    and of every row within ROUNDING_SLACK of the last of them, and how many passed."""
    if floor.value is not None:
        keep = floor.keeps(ids, scores, ROUNDING_SLACK)
        ids, scores = ids[keep], scores[keep]
    scored = len(ids)
    if scored > count:
        cut = np.partition(scores, scored - count)[scored - count]
        ids = ids[scores >= cut - ROUNDING_SLACK]
    return np.sort(ids), scored
