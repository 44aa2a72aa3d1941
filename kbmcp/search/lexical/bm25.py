"""FTS5's bm25, reproduced exactly: the formula both backends score with.

FTS5's `bm25()` (sqlite/ext/fts5/fts5_aux.c, fts5Bm25Function) scores a row as

    score = sum over the query's phrases, in query order, of
            idf(p) * f(p) * (k1 + 1) / (f(p) + k1 * (1 - b + b * D / avgdl))

with k1 = 1.2, b = 0.75; f(p) the phrase's instances in the row, each weighted by its column's
weight; D the row's token count over all columns; avgdl the index's total tokens / rows; and
idf(p) = log((N - n + 0.5) / (n + 0.5)) with N the indexed rows and n the rows that contain the
phrase, clamped to 1e-6 when <= 0. `bm25()` returns -score. The functions here evaluate the same
IEEE operations in the same order, so the results are bit-for-bit equal (tests/test_search_bm25.py
compares them with FTS5 on random scopes). The PostgreSQL backend evaluates the same operations
in SQL (kbmcp/store/postgres/keyword.py), with these constants.

On SQLite, N and the column totals come from FTS5's "averages" record and per-row column sizes
from its docsize records (kbmcp/store/sqlite/search/lexical/fts.py); on PostgreSQL from the
backend's own keyword tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6


@dataclass(frozen=True)
class IndexStats:
    rows: int  # N: rows in the index
    total_tokens: int  # tokens over every column of every row

    @property
    def avgdl(self) -> float:
        return float(self.total_tokens) / float(self.rows) if self.rows else 0.0


def idf(rows: int, containing: int) -> float:
    value = math.log((rows - containing + 0.5) / (containing + 0.5))
    return IDF_FLOOR if value <= 0.0 else value


def contributions(
    idf_value: float, frequency: np.ndarray, doc_length: np.ndarray, avgdl: float
) -> np.ndarray:
    """One phrase's bm25 term for each row (float64), evaluated as fts5Bm25Function does:
    idf * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * D / avgdl)))."""
    f = frequency.astype(np.float64, copy=False)
    d = doc_length.astype(np.float64, copy=False)
    return idf_value * ((f * (K1 + 1.0)) / (f + K1 * ((1 - B) + ((B * d) / avgdl))))


# Column-weight sums are multiples of 1/1024 (scan.exact_weights): f is snapped to this grid.
FREQUENCY_GRID = 1024.0


def solve_frequency(
    contributions: np.ndarray, idf_value: float, lengths: np.ndarray, avgdl: float
) -> np.ndarray:
    """f from FTS5's bm25 term c of one phrase: c = idf*f*(k1+1) / (f + K) with
    K = k1*(1 - b + b*D/avgdl), so f = c*K / (idf*(k1+1) - c), snapped to the weight grid.
    Check the result by recomputing `contributions` (exact for grid weights)."""
    d = lengths.astype(np.float64)
    k = K1 * ((1 - B) + ((B * d) / avgdl))
    f = contributions * k / (idf_value * (K1 + 1.0) - contributions)
    return np.round(f * FREQUENCY_GRID) / FREQUENCY_GRID
