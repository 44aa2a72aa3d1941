"""An in-process copy of the indexed chunk vectors, kept exact against the file.

Why: reading vectors from SQLite costs ~3 us per row (10k rows: ~30 ms) and a vec0 KNN's cost
grows with k (bit[384] at 100k: k=10 6 ms, k=100 18 ms, k=800 183 ms; float: 81 ms at k=10), while
numpy over a matrix in memory scores 10k gathered rows in ~2 ms and Hamming-scans 100k packed
sign bits in a few ms. So each connection keeps:

- `ids`: the chunk ids of every indexed chunk (current revision of a published document), sorted;
- `matrix`: their float32 vectors, L2-normalised (cosine = dot product);
- `bits`: their sign bits packed into uint64 words, for the coarse stage of large scopes.

Correctness when another process writes (a CLI ingest next to a running server): before each
use, inside the search's read transaction, the cache compares a cheap fingerprint of the file:
`PRAGMA data_version` (changes when ANOTHER connection commits), this connection's
`total_changes()` (its own writes) and the model record (a re-embed keeps chunk ids but replaces
every vector). If anything changed it re-reads the indexed id list and loads only the vectors of
new ids (a chunk's vector never changes while its id lives: revisions are immutable, and the only
rewrite of vectors, `kbmcp reembed`, changes the model record and forces a full reload).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import apsw
import numpy as np

# The rows of the vec0 index chunk_vec: vectors of the current revisions of published documents.
SELECT_INDEXED_VECTORS = """
SELECT v.chunk_id, v.embedding
FROM document AS d
JOIN chunk AS c ON c.revision_id = d.current_revision_id
JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE d.status = 'published'
"""
SELECT_INDEXED_IDS = """
SELECT c.id
FROM document AS d
JOIN chunk AS c ON c.revision_id = d.current_revision_id
JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE d.status = 'published'
ORDER BY c.id
"""
SELECT_VECTORS = "SELECT chunk_id, embedding FROM chunk_vector WHERE chunk_id IN carray(:ids)"
SELECT_MODEL_STAMP = "SELECT name, dimension, version, recorded_at FROM embedding_model"


@dataclass
class IndexedVectors:
    ids: np.ndarray  # (n,) int64, sorted
    matrix: np.ndarray  # (n, d) float32, unit rows (zero rows stay zero)
    bits: np.ndarray  # (n, ceil(d / 64)) uint64: sign bits
    fingerprint: tuple[object, ...] = ()

    def positions(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Row positions of `chunk_ids` (all of which must be cached)."""
        return np.searchsorted(self.ids, chunk_ids)


_CACHES: weakref.WeakKeyDictionary[apsw.Connection, IndexedVectors] = weakref.WeakKeyDictionary()


def indexed_vectors(conn: apsw.Connection) -> IndexedVectors | None:
    """The connection's up-to-date cache, or None before any model is recorded."""
    fingerprint = _fingerprint(conn)
    if fingerprint[-1] is None:
        return None
    cached = _CACHES.get(conn)
    if cached is not None and cached.fingerprint == fingerprint:
        return cached
    if cached is None or cached.fingerprint[-1] != fingerprint[-1]:
        fresh = _load_all(conn)
    else:
        fresh = _refresh(conn, cached)
    fresh.fingerprint = _fingerprint(conn)
    _CACHES[conn] = fresh
    return fresh


def _fingerprint(conn: apsw.Connection) -> tuple[object, ...]:
    data_version = conn.execute("PRAGMA data_version").fetchone()[0]
    model = conn.execute(SELECT_MODEL_STAMP).fetchone()
    return (data_version, conn.total_changes(), model)


def _load_all(conn: apsw.Connection) -> IndexedVectors:
    rows = conn.execute(SELECT_INDEXED_VECTORS + " ORDER BY v.chunk_id").fetchall()
    return _build(rows)


def _refresh(conn: apsw.Connection, cached: IndexedVectors) -> IndexedVectors:
    rows = conn.execute(SELECT_INDEXED_IDS).fetchall()
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    keep = np.isin(cached.ids, ids, assume_unique=True)
    new_ids = np.setdiff1d(ids, cached.ids, assume_unique=True)
    added = _build(
        conn.execute(SELECT_VECTORS, {"ids": apsw.carray(new_ids)}).fetchall()
        if len(new_ids)
        else [],
        dimension=cached.matrix.shape[1],
    )
    merged_ids = np.concatenate([cached.ids[keep], added.ids])
    order = np.argsort(merged_ids, kind="stable")
    return IndexedVectors(
        ids=merged_ids[order],
        matrix=np.concatenate([cached.matrix[keep], added.matrix])[order],
        bits=np.concatenate([cached.bits[keep], added.bits])[order],
    )


def _build(rows: list[tuple[int, bytes]], dimension: int | None = None) -> IndexedVectors:
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    if rows:
        dimension = len(rows[0][1]) // 4
    dimension = dimension or 0
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32)
    matrix = matrix.reshape(len(rows), dimension).copy()
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    order = np.argsort(ids, kind="stable")
    return IndexedVectors(ids=ids[order], matrix=matrix[order], bits=sign_bits(matrix[order]))


def sign_bits(matrix: np.ndarray) -> np.ndarray:
    """Pack the signs of each row into uint64 words (a vector's 1-bit quantisation)."""
    packed = np.packbits(matrix > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)
