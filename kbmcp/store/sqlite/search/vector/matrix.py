"""Accelerator: an in-memory copy of the indexed chunk vectors, updated in place on writes.

Why: reading vectors from SQLite costs ~3 us a row (10k rows: ~30 ms) and a vec0 KNN scans every
row (~60-90 ms at 100k), while numpy scores 10k gathered rows of a matrix in memory in ~2 ms and
all 100k rows in ~7-10 ms. The copy holds, per indexed chunk (the rows of the `indexed_chunk`
view that have a vector):

- `ids`: chunk ids, ascending (chunk ids only grow, so new chunks are appended);
- `matrix`: float32 vectors, L2-normalised (cosine = dot product);
- `documents` / `stores`: the document and the knowledge base (or memory store) of each row, and
  `alive`: whether the row is still indexed. They let a scope's chunks be found without SQL:
  whole stores (a token's readable set, documents without memories: `ids_of_stores`), or the
  documents that a request's filters select (`ids_of_scope`).

Arrays have spare capacity, so appending a document's chunks copies only the new rows, and a
document that leaves the index only clears its rows' `alive` flags (rows are compacted when a
quarter are dead). `kbmcp/search/accelerator.py` decides when to update (the index change log).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from kbmcp.store.sqlite.search.growth import capacity_for, grown
from kbmcp.store.sqlite.search.sorted_ids import positions_of, present_positions
from kbmcp.store.sqlite.search.vector.blocks import run_blocks

SELECT_INDEXED_VECTORS = """
SELECT i.chunk_id, i.document_id, i.knowledge_base_id, v.embedding
FROM indexed_chunk AS i
JOIN chunk_vector AS v ON v.chunk_id = i.chunk_id
{where}
ORDER BY i.chunk_id
"""
OF_DOCUMENTS = "WHERE i.document_id IN carray(:documents)"
GATHER_BLOCK = 256  # rows gathered and scored per step (see `similarities`)
# Elements of the matrix per BLAS call when every row is scored (see `all_similarities`).
FULL_PASS_BLOCK_ELEMENTS = 256 * 1024
BUILD_BLOCK = 4096  # rows read from the file per step when the copy is built
COMPACT_DEAD_FRACTION = 0.25


@dataclass
class VectorRows:
    """Vectors read from the file: ids ascending, unit rows."""

    ids: np.ndarray  # (n,) int64
    documents: np.ndarray  # (n,) int64
    stores: np.ndarray  # (n,) int64: knowledge_base ids
    matrix: np.ndarray  # (n, d) float32


class VectorMatrix:
    """The indexed vectors of one file (see the module docstring)."""

    def __init__(self, rows: VectorRows) -> None:
        self._size = len(rows.ids)
        self._ids = rows.ids
        self._documents = rows.documents
        self._stores = rows.stores
        self._matrix = rows.matrix
        self._alive = np.ones(self._size, dtype=bool)
        self._live_rows: np.ndarray | None = None
        # The live rows ordered by document, and by store: (their document / store ids, sorted;
        # their positions, ascending within each document / store).
        self._by_document: tuple[np.ndarray, np.ndarray] | None = None
        self._by_store: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def load(cls, conn: apsw.Connection) -> VectorMatrix:
        return cls(read_vectors(conn.execute(SELECT_INDEXED_VECTORS.format(where=""))))

    @property
    def dimension(self) -> int:
        return self._matrix.shape[1]

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self._size]

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self._size]

    def live_rows(self) -> np.ndarray:
        """Positions of every indexed row."""
        if self._live_rows is None:
            self._live_rows = np.flatnonzero(self._alive[: self._size])
        return self._live_rows

    def ids_of_stores(self, store_ids: Sequence[int]) -> np.ndarray:
        """The ids (ascending) of the indexed chunks of these knowledge bases / memory stores:
        the same rows as the scope SQL over `indexed_chunk` (every indexed chunk has a vector;
        tests/test_search_one_shot.py compares the two)."""
        return self.ids[np.sort(self._rows_of_whole_stores(store_ids))]

    def ids_of_scope(self, parts: Sequence[tuple[Sequence[int], np.ndarray | None]]) -> np.ndarray:
        """The ids (ascending) of the indexed chunks of a scope given per kind as (stores,
        documents): the chunks of those stores, of only those documents (sorted ids) when given.
        A document's rows are found by a binary search in the rows ordered by document, so the
        cost follows the scope, not the file (search/scope.py `filter_documents` gives the
        parts; tests/test_search_one_shot.py compares with the scope SQL)."""
        found = []
        for stores, documents in parts:
            if documents is None:
                found.append(self._rows_of_whole_stores(stores))
                continue
            by_document, rows = self._document_order()
            first = np.searchsorted(by_document, documents, side="left")
            counts = np.searchsorted(by_document, documents, side="right") - first
            # Each document's run of rows, laid end to end: run start + position within run.
            within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            found.append(self._rows_of_stores(rows[np.repeat(first, counts) + within], stores))
        rows = np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.intp)
        return self.ids[rows]

    def _rows_of_stores(self, rows: np.ndarray, stores: Sequence[int]) -> np.ndarray:
        wanted = np.asarray(sorted(set(stores)), dtype=np.int64)
        return rows[np.isin(self._stores[rows], wanted)]

    def _rows_of_whole_stores(self, stores: Sequence[int]) -> np.ndarray:
        """The live rows of these stores (ascending within each store): each store's run of the
        rows ordered by store, found by binary search. Not a test of every row's store: that
        cost followed the whole file, so a tenant's search took longer the more other tenants
        stored (200 rows of a tenant beside another's 20,200: ~70 us, now ~10 us)."""
        by_store, rows = self._store_order()
        wanted = np.unique(np.asarray(list(stores), dtype=np.int64))
        first = np.searchsorted(by_store, wanted, side="left")
        last = np.searchsorted(by_store, wanted, side="right")
        runs = [rows[start:stop] for start, stop in zip(first, last, strict=True) if stop > start]
        return np.concatenate(runs) if runs else np.zeros(0, dtype=np.intp)

    def _document_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(document id of each live row, ascending; the rows in that order), kept until the
        rows change."""
        if self._by_document is None:
            self._by_document = self._ordered_by(self._documents)
        return self._by_document

    def _store_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(store id of each live row, ascending; the rows in that order), kept until the rows
        change."""
        if self._by_store is None:
            self._by_store = self._ordered_by(self._stores)
        return self._by_store

    def _ordered_by(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = self.live_rows()
        order = np.argsort(keys[rows], kind="stable")
        return keys[rows][order], rows[order]

    def rows_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Positions of the live rows among `chunk_ids` (ascending ids; others are skipped: a
        chunk without a stored vector is never replaced by a neighbour)."""
        found = present_positions(self.ids, chunk_ids)
        return found[self._alive[found]]

    def update_documents(self, conn: apsw.Connection, document_ids: Sequence[int]) -> bool:
        """Bring the rows of these documents up to date with the file (inside the caller's read
        transaction). False when the copy cannot be updated in place (a vector of another
        dimension, a chunk id below the largest one held): the caller then reloads it."""
        documents = np.asarray(sorted(set(document_ids)), dtype=np.int64)
        self._alive[: self._size][np.isin(self._documents[: self._size], documents)] = False
        fresh = read_vectors(
            conn.execute(
                SELECT_INDEXED_VECTORS.format(where=OF_DOCUMENTS),
                {"documents": apsw.carray(documents)},
            ),
            dimension=self.dimension,
        )
        if fresh.matrix.shape[1] != self.dimension:
            return False
        known = positions_of(self.ids, fresh.ids)
        existing = known >= 0
        # A re-indexed chunk (e.g. its document was retitled: the title is part of the embedding
        # input) keeps its row; its vector is re-read.
        rows = known[existing]
        self._matrix[rows] = fresh.matrix[existing]
        self._documents[rows] = fresh.documents[existing]
        self._stores[rows] = fresh.stores[existing]
        self._alive[rows] = True
        new = ~existing
        if new.any():
            if self._size and fresh.ids[new][0] <= self._ids[self._size - 1]:
                return False
            self._append(fresh, new)
        self._live_rows = None
        self._by_document = self._by_store = None
        if self._size and np.count_nonzero(~self._alive[: self._size]) > (
            COMPACT_DEAD_FRACTION * self._size
        ):
            self._compact()
        return True

    def _append(self, fresh: VectorRows, new: np.ndarray) -> None:
        count = int(np.count_nonzero(new))
        needed = self._size + count
        if needed > len(self._ids):
            capacity = capacity_for(len(self._ids), needed)
            self._ids = grown(self._ids, capacity)
            self._documents = grown(self._documents, capacity)
            self._stores = grown(self._stores, capacity)
            self._matrix = grown(self._matrix, capacity)
            self._alive = grown(self._alive, capacity)
        end = self._size + count
        self._ids[self._size : end] = fresh.ids[new]
        self._documents[self._size : end] = fresh.documents[new]
        self._stores[self._size : end] = fresh.stores[new]
        self._matrix[self._size : end] = fresh.matrix[new]
        self._alive[self._size : end] = True
        self._size = end

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._size])
        self._ids = self._ids[keep]
        self._documents = self._documents[keep]
        self._stores = self._stores[keep]
        self._matrix = self._matrix[keep]
        self._alive = np.ones(len(keep), dtype=bool)
        self._size = len(keep)


def read_vectors(
    rows: Iterable[tuple[int, int, int, bytes]], dimension: int | None = None
) -> VectorRows:
    """Unit-normalised vectors from (chunk id, document id, knowledge base id, blob) rows in
    ascending chunk id order.

    Rows are consumed in blocks so that the only large allocations are the blocks and the final
    matrix: building 100k x 384 from a list of blobs, one joined copy, a normalised copy and a
    reordered copy peaked at ~1 GB for 150 MB of vectors.
    """
    id_blocks: list[np.ndarray] = []
    document_blocks: list[np.ndarray] = []
    store_blocks: list[np.ndarray] = []
    matrix_blocks: list[np.ndarray] = []
    iterator = iter(rows)
    while block := list(itertools.islice(iterator, BUILD_BLOCK)):
        dimension = len(block[0][3]) // 4
        for column, blocks in enumerate((id_blocks, document_blocks, store_blocks)):
            blocks.append(
                np.fromiter((row[column] for row in block), dtype=np.int64, count=len(block))
            )
        joined = b"".join(row[3] for row in block)
        matrix_blocks.append(np.frombuffer(joined, dtype=np.float32).reshape(len(block), dimension))
    empty = np.empty(0, dtype=np.int64)
    ids = np.concatenate(id_blocks) if id_blocks else empty
    documents = np.concatenate(document_blocks) if document_blocks else empty
    stores = np.concatenate(store_blocks) if store_blocks else empty
    if matrix_blocks:
        matrix = np.concatenate(matrix_blocks)  # a fresh, writable array
    else:
        matrix = np.empty((0, dimension or 0), dtype=np.float32)
    del matrix_blocks
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return VectorRows(ids=ids, documents=documents, stores=stores, matrix=matrix)


def similarities(matrix: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix[rows] @ query, gathered in blocks of GATHER_BLOCK rows (on two threads when there
    are many: vector/blocks.py).

    Blocks: gathering 10k rows at once allocates a fresh 15 MB array whose pages the kernel
    must fault in on every query: 10.5 ms for a 10k-row scope against 1.6 ms in blocks of 256
    rows, which stay in the allocator's reused memory and in cache."""
    out = np.empty(len(rows), dtype=np.float32)

    def block(index: int) -> None:
        start = index * GATHER_BLOCK
        stop = min(start + GATHER_BLOCK, len(rows))
        np.matmul(matrix[rows[start:stop]], query, out=out[start:stop])

    run_blocks(-(-len(rows) // GATHER_BLOCK), block, GATHER_BLOCK * matrix.shape[1])
    return out


def all_similarities(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix @ query, in contiguous blocks of at most FULL_PASS_BLOCK_ELEMENTS elements (on two
    threads when there are many: vector/blocks.py).

    Blocks: above a size (~460k elements in OpenBLAS 0.3) BLAS splits a matrix-vector product
    over threads, and on a busy machine those threads wait for a core. Measured at load ~9 on
    2 cores: 5,183 x 384 in one call 23 ms, in blocks 0.9 ms; 100k x 384 48 ms against 31 ms. A
    block below the threshold runs on the thread that takes it, which is also what a server
    answering concurrent requests wants. Contiguous slices: no gather, no copy."""
    out = np.empty(len(matrix), dtype=np.float32)
    step = max(1, FULL_PASS_BLOCK_ELEMENTS // max(1, matrix.shape[1]))

    def block(index: int) -> None:
        start = index * step
        np.matmul(matrix[start : start + step], query, out=out[start : start + step])

    run_blocks(-(-len(matrix) // step), block, step * matrix.shape[1])
    return out
