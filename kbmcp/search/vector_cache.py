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

import itertools
import weakref
from collections.abc import Iterable
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
GATHER_BLOCK = 256  # rows gathered and scored per step (see `similarities`)
BUILD_BLOCK = 4096  # rows read from the file per step when the copy is built


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
    return build_vectors(conn.execute(SELECT_INDEXED_VECTORS + " ORDER BY v.chunk_id"))


def _refresh(conn: apsw.Connection, cached: IndexedVectors) -> IndexedVectors:
    rows = conn.execute(SELECT_INDEXED_IDS).fetchall()
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    keep = np.isin(cached.ids, ids, assume_unique=True)
    new_ids = np.setdiff1d(ids, cached.ids, assume_unique=True)
    added = build_vectors(
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


def build_vectors(
    rows: Iterable[tuple[int, bytes]], dimension: int | None = None
) -> IndexedVectors:
    """Unit-normalised vectors with their sign bits, ordered by chunk id.

    Rows are consumed in blocks so that the only large allocations are the blocks and the final
    matrix: building 100k x 384 from a list of blobs, one joined copy, a normalised copy and a
    reordered copy peaked at ~1 GB for 150 MB of vectors.
    """
    id_blocks: list[np.ndarray] = []
    matrix_blocks: list[np.ndarray] = []
    iterator = iter(rows)
    while block := list(itertools.islice(iterator, BUILD_BLOCK)):
        dimension = len(block[0][1]) // 4
        id_blocks.append(np.fromiter((row[0] for row in block), dtype=np.int64, count=len(block)))
        joined = b"".join(row[1] for row in block)
        matrix_blocks.append(np.frombuffer(joined, dtype=np.float32).reshape(len(block), dimension))
    ids = np.concatenate(id_blocks) if id_blocks else np.empty(0, dtype=np.int64)
    if matrix_blocks:
        matrix = np.concatenate(matrix_blocks)  # a fresh, writable array
    else:
        matrix = np.empty((0, dimension or 0), dtype=np.float32)
    del matrix_blocks
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        order = np.argsort(ids, kind="stable")
        ids, matrix = ids[order], matrix[order]
    return IndexedVectors(ids=ids, matrix=matrix, bits=sign_bits(matrix))


def similarities(matrix: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix[rows] @ query, gathered in blocks of GATHER_BLOCK rows.

    Blocks: gathering 10k rows at once allocates a fresh 15 MB array whose pages the kernel
    must fault in on every query: 10.5 ms for a 10k-row scope against 1.6 ms in blocks of 256
    rows, which stay in the allocator's reused memory and in cache.
    einsum, not matmul: BLAS's matrix-vector kernel rounds a row's dot product differently
    depending on its position in the block (tail rows), so the same row scored among other rows
    (the cache) and alone (semantic_sql.py) could differ in the last bit and near-ties could swap.
    einsum's loop computes each row the same way; 10k rows 2.2 ms against 1.6 ms."""
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), GATHER_BLOCK):
        stop = min(start + GATHER_BLOCK, len(rows))
        np.einsum("ij,j->i", matrix[rows[start:stop]], query, out=out[start:stop])
    return out


def has_vectors(conn: apsw.Connection) -> bool:
    """Whether this connection already holds a copy (possibly stale: it is refreshed
    incrementally on use, which is cheap compared with a first fill)."""
    return conn in _CACHES


def sign_bits(matrix: np.ndarray) -> np.ndarray:
    """Pack the signs of each row into uint64 words (a vector's 1-bit quantisation)."""
    packed = np.packbits(matrix > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)
