"""The best `depth` of a channel's scored rows, with the engine's exact tie-break."""

from __future__ import annotations

import numpy as np


def top_k(ids: np.ndarray, scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """The `depth` highest-scoring (ids, scores), ties broken by ascending id, and whether more
    rows than `depth` were given.

    Sorting every hit (100k for a common word) costs ~10 ms, so the rows scoring at least the
    depth-th best are kept first; everything tied with it is kept too, so the final order (the
    SQL's `ORDER BY score DESC, rowid`) stays exact.
    """
    more = len(ids) > depth
    if more:
        threshold = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        keep = scores >= threshold
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores))[:depth]
    return ids[order], scores[order], more


def best_through_ties(
    ids: np.ndarray, scores: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Of rows sorted best first (`top_k`'s order), the first `count` and every later row tied
    with the last of them: all rows that can come before the count-th in any tie-break."""
    if len(scores) <= count:
        return ids, scores
    end = count + int(np.count_nonzero(scores[count:] >= scores[count - 1]))
    return ids[:end], scores[:end]
