"""Each fast path of the search engine equals its plain reference.

The fast paths exist for cost only (docs/search.md, "Performance"): whatever they compute must be
exactly what the straightforward version computes.
"""

from __future__ import annotations

import numpy as np
import pytest

from kbmcp.search.vector import matrix as vector_matrix
from kbmcp.search.vector.matrix import FULL_PASS_BLOCK_ELEMENTS, all_similarities


@pytest.mark.parametrize("rows", [0, 1, 5, 683, 2049, 5183])
@pytest.mark.parametrize("dimension", [3, 384, 1024])
def test_all_similarities_equal_row_by_row_products_in_small_blas_calls(
    rows: int, dimension: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(rows + dimension)
    matrix = rng.standard_normal((rows, dimension)).astype(np.float32)
    query = rng.standard_normal(dimension).astype(np.float32)
    calls: list[int] = []
    real_matmul = np.matmul

    def counting_matmul(a: np.ndarray, b: np.ndarray, **kwargs: object) -> np.ndarray:
        calls.append(a.size)
        return real_matmul(a, b, **kwargs)

    monkeypatch.setattr(vector_matrix.np, "matmul", counting_matmul)
    got = all_similarities(matrix, query)
    monkeypatch.undo()
    reference = np.array([np.dot(row, query) for row in matrix], dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == (rows,)
    # BLAS may sum in another order than np.dot: equal to float32 rounding.
    assert np.allclose(got, reference, rtol=1e-5, atol=1e-5 * np.sqrt(dimension))
    # Every call small enough to run on the calling thread, and every row scored once.
    assert all(size <= max(FULL_PASS_BLOCK_ELEMENTS, dimension) for size in calls)
    assert sum(calls) == matrix.size
