"""Looking ids up in an ascending id array (the accelerators' row tables)."""

from __future__ import annotations

import numpy as np


def positions_of(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """Position of each of `needles` in the ascending `haystack`, -1 where it is absent."""
    positions = np.searchsorted(haystack, needles)
    inside = positions < len(haystack)
    found = np.zeros(len(needles), dtype=bool)
    found[inside] = haystack[positions[inside]] == needles[inside]
    return np.where(found, positions, -1)


def present_positions(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """Positions in `haystack` of those of `needles` it holds (absent ones are skipped)."""
    positions = positions_of(haystack, needles)
    return positions[positions >= 0]
