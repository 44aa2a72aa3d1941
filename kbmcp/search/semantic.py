"""The vector channel: cosine similarity of the query to chunk vectors, inside the scope.

Vectors come from the connection's in-memory copy (`vector_cache`), checked against the file
before every use. The strategy depends on the size of the allowed set (bench/search.py):

- "exact": scopes up to EXACT_SCAN_MAX_ROWS chunks. The allowed rows are gathered and scored
  with one matrix-vector product: brute force over exactly the allowed rows, recall 1.0 by
  construction, cost proportional to the scope, not the corpus.
- "index": larger scopes and unscoped searches. A Hamming scan over the rows' packed sign bits
  (the binary index; a few ms for 100k rows) picks the RERANK nearest allowed rows, which are
  re-scored exactly. The allow-list is applied before the coarse top-k, so the scope still
  applies before the limit. Recall against brute force is measured, not guaranteed.

Measured alternatives (100k x 384, loaded 2-core machine): ORDER BY vec_distance_cosine over
chunk_vector restricted by `chunk_id IN carray(...)` and reading blobs into numpy both cost
~3 us per allowed row (~30 ms for 10k); a vec0 float KNN ~81 ms; a vec0 bit[384] KNN 6 ms at
k=10 but 18 ms at k=100 and 183 ms at k=800 (its top-k maintenance grows with k), too slow for
a re-rank pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import numpy as np

from kbmcp.search.vector_cache import IndexedVectors, indexed_vectors, sign_bits

EXACT_SCAN_MAX_ROWS = 20_000
RERANK_MIN = 1000  # coarse candidates re-scored exactly, at least...
RERANK_PER_RESULT = 10  # ...and this many per requested candidate


@dataclass(frozen=True)
class SemanticHits:
    chunk_ids: list[int]
    similarities: list[float]
    strategy: str  # "exact" | "index"
    more: bool  # the channel had more candidates above the floor than it returned


def choose_strategy(allowed: np.ndarray | None) -> str:
    """Exact scan for scopes up to EXACT_SCAN_MAX_ROWS chunks; the index above and unscoped."""
    return "exact" if allowed is not None and len(allowed) <= EXACT_SCAN_MAX_ROWS else "index"


def search_semantic(
    conn: apsw.Connection,
    query_vector: np.ndarray,
    allowed: np.ndarray | None,
    depth: int,
    min_similarity: float | None,
) -> SemanticHits:
    query = _unit(query_vector)
    strategy = choose_strategy(allowed)
    vectors = indexed_vectors(conn)
    if query is None or vectors is None or (allowed is not None and len(allowed) == 0):
        # A featureless query (e.g. only punctuation for the hashing embedder) has no direction.
        return SemanticHits([], [], strategy, False)
    rows = _rows(vectors, allowed)
    if strategy == "index":
        rows = _coarse_rows(vectors, query, rows, max(RERANK_MIN, depth * RERANK_PER_RESULT))
    similarities = vectors.matrix[rows] @ query
    return _top(vectors.ids[rows], similarities, depth, min_similarity, strategy)


def _rows(vectors: IndexedVectors, allowed: np.ndarray | None) -> np.ndarray:
    """Cache row positions of the allowed chunks (every row when unscoped)."""
    if allowed is None:
        return np.arange(len(vectors.ids))
    positions = vectors.positions(allowed)
    inside = positions < len(vectors.ids)
    positions = positions[inside]
    # A chunk without a stored vector is not in the cache; never score a neighbour instead.
    return positions[vectors.ids[positions] == allowed[inside]]


def _coarse_rows(
    vectors: IndexedVectors, query: np.ndarray, rows: np.ndarray, pool: int
) -> np.ndarray:
    """The `pool` rows nearest to the query in Hamming distance of sign bits."""
    if len(rows) <= pool:
        return rows
    query_bits = sign_bits(query.reshape(1, -1))[0]
    distances = np.bitwise_count(vectors.bits[rows] ^ query_bits).sum(axis=1, dtype=np.int32)
    return rows[np.argpartition(distances, pool - 1)[:pool]]


def _top(
    ids: np.ndarray,
    similarities: np.ndarray,
    depth: int,
    min_similarity: float | None,
    strategy: str,
) -> SemanticHits:
    if min_similarity is not None:
        keep = similarities >= min_similarity
        ids, similarities = ids[keep], similarities[keep]
    more = len(ids) > depth
    if more:
        # Keep everything tied with the depth-th best so the final order (ties by id) is exact.
        threshold = np.partition(similarities, len(similarities) - depth)[len(similarities) - depth]
        keep = similarities >= threshold
        ids, similarities = ids[keep], similarities[keep]
    order = np.lexsort((ids, -similarities))[:depth]
    return SemanticHits(
        chunk_ids=ids[order].tolist(),
        similarities=similarities[order].astype(float).tolist(),
        strategy=strategy,
        more=more,
    )


def _unit(vector: np.ndarray) -> np.ndarray | None:
    query = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(query))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return query / np.float32(norm)
