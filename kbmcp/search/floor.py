"""The similarity floor of a request: `min_similarity`, and the chunks it never drops.

A caller's `min_similarity` drops vector candidates below that cosine before fusion. Explicit
targets are exempt: the documents a caller named, by id (`document_ids` / `knowledge_ids`) or by
their exact path (an entry of `document_paths` that is a document's whole path, as explicit as
its id). A floor never empties a document the caller pointed at. Scopes of many documents (a
knowledge base, a path prefix, tags, metadata) are not targets: there the floor does its job of
dropping weak semantic matches (keyword hits are never dropped). The exemption belongs to the
targeted documents, not to the request: other documents matched by a prefix in the same
`document_paths`, and memories searched in the same request (include_memories=true, or
memory_store_ids beside document_ids), keep the floor. So the floor is decided per row:
`exempt` lists the chunk ids it does not apply to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kbmcp.search.resolved import Scope, SimilarityFloor

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection, Store


def similarity_floor(
    store: Store, conn: Connection, scope: Scope, min_similarity: float | None
) -> SimilarityFloor:
    selected = scope.filters.get("document_ids")
    paths = scope.filters.get("document_paths")
    if min_similarity is None or (selected is None and paths is None):
        return SimilarityFloor(min_similarity)
    if selected is not None and not scope.memory_store_ids:
        # Only the selected documents are searched: the floor applies to no row at all.
        return SimilarityFloor(None)
    exempt = []
    if selected is not None:
        exempt.append(store.search.selected_document_chunks(conn, selected))
    if paths is not None and scope.readable_kb_ids:
        kb_ids = scope.filters.get("knowledge_base_ids") or scope.readable_kb_ids
        exempt.append(store.search.chunks_at_paths(conn, kb_ids, paths))
    if not exempt:
        return SimilarityFloor(min_similarity)
    return SimilarityFloor(min_similarity, np.unique(np.concatenate(exempt)))
