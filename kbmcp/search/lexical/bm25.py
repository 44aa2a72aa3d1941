"""FTS5's bm25, reproduced exactly, and the index statistics it needs.

FTS5's `bm25()` (sqlite/ext/fts5/fts5_aux.c, fts5Bm25Function) scores a row as

    score = sum over the query's phrases, in query order, of
            idf(p) * f(p) * (k1 + 1) / (f(p) + k1 * (1 - b + b * D / avgdl))

with k1 = 1.2, b = 0.75; f(p) the phrase's instances in the row, each weighted by its column's
weight; D the row's token count over all columns; avgdl the index's total tokens / rows; and
idf(p) = log((N - n + 0.5) / (n + 0.5)) with N the indexed rows and n the rows that contain the
phrase, clamped to 1e-6 when <= 0. `bm25()` returns -score. The functions here evaluate the same
IEEE operations in the same order, so the results are bit-for-bit equal (tests/test_search_bm25.py
compares them with FTS5 on random scopes).

N and the column totals come from FTS5's "averages" record (row id 1 of `<table>_data`: varint N,
then one varint per column); per-row column sizes from `<table>_docsize.sz` (one varint per
column). Both are SQLite varints (big-endian groups of 7 bits, high bit = "more follows").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import apsw
import numpy as np

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6

# FTS5_AVERAGES_ROWID: the record with the row count and per-column token totals.
SELECT_AVERAGES = "SELECT block FROM chunk_fts_data WHERE id = 1"


@dataclass(frozen=True)
class IndexStats:
    rows: int  # N: rows in the index
    total_tokens: int  # tokens over every column of every row

    @property
    def avgdl(self) -> float:
        return float(self.total_tokens) / float(self.rows) if self.rows else 0.0


def index_stats(conn: apsw.Connection) -> IndexStats:
    row = conn.execute(SELECT_AVERAGES).fetchone()
    if row is None or not row[0]:
        return IndexStats(0, 0)
    values = decode_varints(row[0])
    return IndexStats(rows=values[0], total_tokens=sum(values[1:]))


def decode_varints(blob: bytes) -> list[int]:
    """A run of SQLite varints (as FTS5 writes them in its averages and docsize records)."""
    values: list[int] = []
    value, length = 0, 0
    for byte in blob:
        length += 1
        if length == 9:  # the 9th byte carries 8 bits
            values.append((value << 8) | byte)
            value, length = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            values.append((value << 7) | byte)
            value, length = 0, 0
    return values


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
