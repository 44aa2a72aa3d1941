"""The vector channel: cosine similarity of the query to chunk vectors, inside the scope.

The strategy depends on the size of the allowed set (measured with bench/search.py, see
docs/search.md):

- "exact": scopes up to EXACT_SCAN_MAX_ROWS chunks. The allowed rows' float32 vectors are read
  from `chunk_vector` by primary key and scored with numpy: brute force over exactly the allowed
  rows, so recall is 1.0 by construction, and cost grows with the scope, not with the corpus.
  (numpy over fetched blobs beat `ORDER BY vec_distance_cosine(...)` in SQL ~3x at 10k rows.)
- "index": larger scopes and unscoped searches. A Hamming KNN over `chunk_vec_bit` (sign-quantised
  vectors, ~5 ms for 100k where a float vec0 scan takes ~85 ms) picks RERANK candidates, which are
  then re-scored exactly from `chunk_vector`. The allow-list is `rowid IN carray(...)`, one of the
  forms vec0 applies BEFORE choosing its k nearest (stack-facts.md), so the scope still applies
  before the limit. Recall against brute force is measured, not guaranteed (>= 0.99 on the bench).

Both read the file on every query: nothing is cached in the process, so a search is always
consistent with what another process (a CLI ingest next to a running server) has committed.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import numpy as np

from kbmcp.store.vectors import BIT_TABLE

EXACT_SCAN_MAX_ROWS = 20_000
RERANK_MIN = 400  # coarse candidates re-ranked exactly, at least...
RERANK_PER_RESULT = 8  # ...and at least this many per requested candidate
VEC0_MAX_K = 4096  # sqlite-vec caps k

FETCH_VECTORS = "SELECT chunk_id, embedding FROM chunk_vector WHERE chunk_id IN carray(:ids)"
BINARY_KNN = f"""
SELECT rowid FROM {BIT_TABLE}
WHERE embedding MATCH vec_quantize_binary(:query) AND k = :k {{allowed}}
"""
# `IN carray(...)` is applied before k; `= x` or `IN (x)` would be applied after it (stack-facts).
ALLOWED = "AND rowid IN carray(:allowed)"


@dataclass(frozen=True)
class SemanticHits:
    chunk_ids: list[int]
    similarities: list[float]
    strategy: str  # "exact" | "index"
    more: bool  # the channel had more candidates above the floor than it returned


def search_semantic(
    conn: apsw.Connection,
    query_vector: np.ndarray,
    allowed: np.ndarray | None,
    depth: int,
    min_similarity: float | None,
) -> SemanticHits:
    query = _unit(query_vector)
    strategy = choose_strategy(allowed)
    if query is None or (allowed is not None and len(allowed) == 0):
        # A featureless query (e.g. only punctuation for the hashing embedder) has no direction.
        return SemanticHits([], [], strategy, False)
    candidates = allowed if strategy == "exact" else _binary_candidates(conn, query, allowed, depth)
    ids, similarities = _exact_similarities(conn, query, candidates)
    return _top(ids, similarities, depth, min_similarity, strategy)


def choose_strategy(allowed: np.ndarray | None) -> str:
    """Exact scan for scopes up to EXACT_SCAN_MAX_ROWS chunks; the index above and unscoped."""
    return "exact" if allowed is not None and len(allowed) <= EXACT_SCAN_MAX_ROWS else "index"


def _binary_candidates(
    conn: apsw.Connection, query: np.ndarray, allowed: np.ndarray | None, depth: int
) -> np.ndarray:
    k = min(VEC0_MAX_K, max(RERANK_MIN, depth * RERANK_PER_RESULT))
    params: dict[str, object] = {"query": query.tobytes(), "k": k}
    if allowed is not None:
        params["allowed"] = apsw.carray(allowed)
    sql = BINARY_KNN.format(allowed=ALLOWED if allowed is not None else "")
    rows = conn.execute(sql, params).fetchall()
    return np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))


def _exact_similarities(
    conn: apsw.Connection, query: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity of `query` (unit) to the stored vectors of `ids`."""
    if len(ids) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    rows = conn.execute(FETCH_VECTORS, {"ids": apsw.carray(np.ascontiguousarray(ids))}).fetchall()
    found = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(
        len(rows), query.shape[0]
    )
    dots = matrix @ query
    norms = np.linalg.norm(matrix, axis=1)
    similarities = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return found, similarities


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
