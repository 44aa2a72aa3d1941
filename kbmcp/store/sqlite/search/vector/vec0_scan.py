"""The one-shot vector pass: every vector of the vec0 index scored with numpy, read in place.

A process without accelerators (a one-shot `kbmcp search`) that must score more rows than
"sql_exact" reads cheaply used to ask vec0 for its k nearest ("vec0_knn"): an exact scan in C
that scores one row at a time (~130 ms at 100k chunks of 384 dimensions on the 2-core bench
machine). vec0 stores its vectors in blocks of rows, one BLOB per block
(`chunk_vec_vector_chunks00`), with each block's rowids and a validity bitmap beside it
(`chunk_vec_chunks`). Reading every block into one reused buffer with incremental BLOB I/O and
scoring it with one BLAS matrix-vector product takes about half the time (bench/
search_one_shot.py). Nothing is allocated per block: a fresh process pays for every new page
it touches, so a bytes object per 1.5 MB block cost more than the product.

The best rows become a pool that sqlite-vec re-scores inside the ranking statement, exactly as
the server's in-memory pass does (vector/candidates.py `best_pool`), so similarities, near-tie
order and results are the server's, bit for bit.

The layout is sqlite-vec 0.1.9's (pinned in pyproject.toml). `scan_vec0` checks every size it
relies on and returns None for a file whose shadow tables differ; the caller then uses the vec0
KNN, which any layout answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import numpy as np

# The vec0 table's shadow tables (kbmcp/store/sqlite/vectors.py creates `chunk_vec`).
BLOCKS = "SELECT chunk_id, size, validity, rowids FROM chunk_vec_chunks ORDER BY chunk_id"
VECTOR_BLOCK_IDS = "SELECT rowid FROM chunk_vec_vector_chunks00 ORDER BY rowid"
VECTOR_TABLE = "chunk_vec_vector_chunks00"


@dataclass(frozen=True)
class ScannedRows:
    """Every valid row of the vec0 index: its chunk id and its cosine similarity to the query
    (numpy's; sqlite-vec re-scores the pool)."""

    ids: np.ndarray  # int64
    scores: np.ndarray  # float32


def scan_vec0(conn: apsw.Connection, query: np.ndarray) -> ScannedRows | None:
    """Score every valid vec0 row against the unit vector `query` (None: unknown layout)."""
    dimension = len(query)
    blocks = conn.execute(BLOCKS).fetchall()
    vector_ids = [row[0] for row in conn.execute(VECTOR_BLOCK_IDS).fetchall()]
    if [block[0] for block in blocks] != vector_ids:
        return None
    capacity = max((size for _, size, _, _ in blocks), default=0)
    buffer = np.empty((capacity, dimension), dtype=np.float32)
    ids_parts, score_parts = [], []
    blob = None
    try:
        for block_id, size, validity, rowids in blocks:
            if len(validity) != -(-size // 8) or len(rowids) != 8 * size:
                return None
            if blob is None:
                blob = conn.blob_open("main", VECTOR_TABLE, "vectors", block_id, False)
            else:
                blob.reopen(block_id)
            if blob.length() != size * dimension * 4:
                return None
            vectors = buffer[:size]
            blob.read_into(vectors)
            valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
            rows = np.flatnonzero(valid[:size])
            if len(rows) == 0:
                continue
            score_parts.append(_cosines(vectors, query)[rows])
            ids_parts.append(np.frombuffer(rowids, dtype="<i8")[rows].astype(np.int64))
    finally:
        if blob is not None:
            blob.close()
    if not ids_parts:
        return ScannedRows(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
    return ScannedRows(np.concatenate(ids_parts), np.concatenate(score_parts))


def _cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of each row with the unit `query`; 0 for a zero row (sqlite-vec: NULL -> 0)."""
    dots = vectors @ query
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
