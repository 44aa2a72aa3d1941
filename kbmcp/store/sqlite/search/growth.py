"""Arrays with spare capacity for the accelerators' row tables (vector/matrix.py,
lexical/postings.py, lexical/tokens.py): appending rows copies only the new ones, and the
arrays are copied into larger ones GROWTH times their size when they are full."""

from __future__ import annotations

import numpy as np

GROWTH = 1.5


def capacity_for(current: int, needed: int) -> int:
    """Rows for arrays of `current` rows that must hold `needed`."""
    return max(needed, int(current * GROWTH) + 16)


def grown(array: np.ndarray, capacity: int) -> np.ndarray:
    """`array` at the start of a new zeroed array of `capacity` rows (same dtype, row shape)."""
    bigger = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger
