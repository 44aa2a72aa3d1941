"""The similarity floor of a request: `min_similarity`, and the chunks it never drops.

A caller's `min_similarity` drops vector candidates below that cosine before fusion. The
documents a caller selected by id (`document_ids` / `knowledge_ids`) are exempt: a scope the
caller chose is never emptied by a floor. The exemption belongs to those documents, not to the
request: memories searched in the same request (include_memories=true, or memory_store_ids
beside document_ids) keep the floor. So the floor is decided per row: `exempt` lists the chunk
ids it does not apply to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kbmcp.search.scope import Scope

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection, Store


@dataclass(frozen=True)
class SimilarityFloor:
    """`value` None: no floor. `exempt`: chunk ids (sorted int64) the floor does not apply to;
    None when it applies to every row."""

    value: float | None = None
    exempt: np.ndarray | None = None

    def keeps(self, ids: np.ndarray, scores: np.ndarray, slack: float = 0.0) -> np.ndarray:
        """A mask over candidate rows: True for the rows the floor keeps (`slack` below the
        floor still counts as above it)."""
        if self.value is None:
            return np.ones(len(ids), dtype=bool)
        keep = scores >= self.value - slack
        if self.exempt is not None:
            keep |= np.isin(ids, self.exempt)
        return keep

    def exempt_json(self) -> str:
        """The exempt ids as a JSON array, the SQL strategies' parameter."""
        return json.dumps([] if self.exempt is None else self.exempt.tolist())


def similarity_floor(
    store: Store, conn: Connection, scope: Scope, min_similarity: float | None
) -> SimilarityFloor:
    selected = scope.filters.get("document_ids")
    if min_similarity is None or selected is None:
        return SimilarityFloor(min_similarity)
    if not scope.memory_store_ids:
        # Only the selected documents are searched: the floor applies to no row at all.
        return SimilarityFloor(None)
    return SimilarityFloor(min_similarity, store.search.selected_document_chunks(conn, selected))
