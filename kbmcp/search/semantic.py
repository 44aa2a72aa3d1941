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

import math
from dataclasses import dataclass

import apsw
import numpy as np

from kbmcp.search.semantic_sql import nearest_sql
from kbmcp.search.top_k import top_k
from kbmcp.search.vector_cache import (
    IndexedVectors,
    has_vectors,
    indexed_vectors,
    sign_bits,
)
from kbmcp.search.vector_cache import similarities as vector_similarities

EXACT_SCAN_MAX_ROWS = 20_000
# Coarse candidates re-scored exactly: the largest of these three. The fraction is what keeps
# recall with real embeddings: on SciFact's 10,765 MiniLM chunk vectors (300 queries), a sign-bit
# shortlist of 1% of the rows gives recall@10 0.955, 2% 0.983, 5% 0.997 against brute force.
# (The bench's hashing-embedder vectors are far easier: 1,000 of 100k already gave 1.000.)
RERANK_MIN = 1000
RERANK_PER_RESULT = 10  # per requested candidate
RERANK_FRACTION = 0.05  # of the allowed rows
HAMMING_BLOCK = 8192


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
    use_cache: bool = True,
) -> SemanticHits:
    """`use_cache=False` (a one-shot process): unless this connection already holds the vector
    copy, candidates come from SQL (semantic_sql.py) instead of loading every vector."""
    query = _unit(query_vector)
    strategy = choose_strategy(allowed)
    if query is not None and not use_cache and not has_vectors(conn):
        if allowed is not None and len(allowed) == 0:
            return SemanticHits([], [], strategy, False)
        found = nearest_sql(conn, query, allowed, depth)
        if found is not None:
            ids, similarities, strategy = found
            return _top(ids, similarities, depth, min_similarity, strategy)
    vectors = indexed_vectors(conn)
    if query is None or vectors is None or (allowed is not None and len(allowed) == 0):
        # A featureless query (e.g. only punctuation for the hashing embedder) has no direction.
        return SemanticHits([], [], strategy, False)
    rows = _rows(vectors, allowed)
    if strategy == "index":
        pool = max(RERANK_MIN, depth * RERANK_PER_RESULT, math.ceil(RERANK_FRACTION * len(rows)))
        rows = _coarse_rows(vectors, query, rows, pool)
    similarities = vector_similarities(vectors.matrix, rows, query)
    return _top(vectors.ids[rows], similarities, depth, min_similarity, strategy)


def _rows(vectors: IndexedVectors, allowed: np.ndarray | None) -> np.ndarray:
    """Cache row positions of the allowed chunks (every row when unscoped)."""
    if allowed is None:
        return np.arange(len(vectors.ids), dtype=np.intp)
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
    every_row = len(rows) == len(vectors.ids)  # unscoped: rows is arange, no gather needed
    distances = np.empty(len(rows), dtype=np.int32)
    for start in range(0, len(rows), HAMMING_BLOCK):
        stop = min(start + HAMMING_BLOCK, len(rows))
        bits = vectors.bits[start:stop] if every_row else vectors.bits[rows[start:stop]]
        np.sum(np.bitwise_count(bits ^ query_bits), axis=1, dtype=np.int32,
               out=distances[start:stop])  # fmt: skip
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
    best_ids, best_similarities, more = top_k(ids, similarities, depth)
    return SemanticHits(
        chunk_ids=best_ids.tolist(),
        similarities=best_similarities.astype(float).tolist(),
        strategy=strategy,
        more=more,
    )


def _unit(vector: np.ndarray) -> np.ndarray | None:
    query = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(query))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return query / np.float32(norm)
