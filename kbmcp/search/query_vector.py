"""The query's embedding as both backends' vector channels take it: a float32 unit vector."""

from __future__ import annotations

import numpy as np


def unit(vector: np.ndarray) -> np.ndarray | None:
    """The query as a float32 unit vector; None when it has no direction (a featureless query,
    e.g. only punctuation for the hashing embedder)."""
    query = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(query))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return query / np.float32(norm)
