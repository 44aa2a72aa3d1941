"""Scope before limit: the regression a post-filter design fails.

One target document's chunks rank far below hundreds of decoy chunks. With every channel forced
to a single candidate and limit=1, a search scoped to the target (by id, path prefix, tag or
metadata) must still return its best chunk, in every mode. A design that retrieves the global
top-k and filters afterwards returns nothing here. On SQLite in a server and in a one-shot
process, and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import MODES, SearchFilters, SearchRequest
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.search_corpus import (
    QUERY,
    TARGET_META,
    TARGET_PATH,
    TARGET_TAG,
    ingest,
    write_adversarial_corpus,
)
from tests.store_backends import workspace_on


@pytest.fixture(scope="module")
def adversarial_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("adversarial")
    with Workspace(Settings(db=root / "kb.db", embedder="hash")) as ws:
        ingest(ws, write_adversarial_corpus(root))
    return root / "kb.db"


@pytest.fixture(scope="module", params=["server", "one-shot", "postgres"])
def corpus(adversarial_db: Path, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    """Every search path: SQLite with in-memory caches (server) and SQL only (one-shot CLI), and
    PostgreSQL (a copy of the file)."""
    backend = "postgres" if request.param == "postgres" else "sqlite"
    with workspace_on(backend, adversarial_db, request, long_lived=request.param == "server") as ws:
        yield ws


@pytest.fixture(scope="module")
def reference(adversarial_db: Path) -> Iterator[Workspace]:
    """The SQLite file, for the test's own lookups (ids are equal in the PostgreSQL copy)."""
    with Workspace(Settings(db=adversarial_db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        yield ws


def _target(ws: Workspace) -> tuple[str, list[tuple[int, str, str]]]:
    doc_id = ws.conn.execute(
        "SELECT public_id FROM document WHERE path = ?", (TARGET_PATH,)
    ).fetchone()[0]
    chunks = ws.conn.execute(
        """SELECT c.id, c.public_id, c.text FROM chunk AS c JOIN document AS d
           ON c.revision_id = d.current_revision_id WHERE d.path = ? ORDER BY c.ordinal""",
        (TARGET_PATH,),
    ).fetchall()
    return doc_id, chunks


def _brute_force_best(ws: Workspace) -> str:
    """The target chunk that is best in BOTH channels, computed without the engine: the only
    one containing query words, and the one with the highest cosine to the query."""
    _, chunks = _target(ws)
    words = set(QUERY.lower().split())
    lexical = [public for _, public, text in chunks if words & set(text.lower().split())]
    query = HashingEmbedder().embed([QUERY])[0]
    sims = {}
    for chunk_id, public, _ in chunks:
        blob = ws.conn.execute(
            "SELECT embedding FROM chunk_vector WHERE chunk_id = ?", (chunk_id,)
        ).fetchone()[0]
        vector = np.frombuffer(blob, dtype=np.float32)
        sims[public] = float(vector @ query / np.linalg.norm(vector) / np.linalg.norm(query))
    semantic = max(sims, key=sims.__getitem__)
    assert len(chunks) >= 2 and lexical == [semantic], "corpus precondition"
    return semantic


def _filters(ws: Workspace, how: str) -> SearchFilters:
    doc_id, _ = _target(ws)
    return {
        "document_ids": SearchFilters(document_ids=[doc_id]),
        "document_paths": SearchFilters(document_paths=["garden/"]),
        "tags": SearchFilters(tags=dict([TARGET_TAG])),
        "metadata": SearchFilters(metadata=dict([TARGET_META])),
    }[how]


@pytest.mark.parametrize("mode", MODES)
def test_unscoped_target_ranks_far_below_the_decoys(corpus: Workspace, mode: str) -> None:
    response = search(corpus, corpus.local_principal(), SearchRequest(QUERY, mode=mode, limit=100))
    assert len(response.results) == 100
    assert all(r.path != TARGET_PATH for r in response.results)


@pytest.mark.parametrize("how", ["document_ids", "document_paths", "tags", "metadata"])
@pytest.mark.parametrize("mode", MODES)
def test_scoped_search_finds_the_best_chunk_with_one_candidate(
    corpus: Workspace, reference: Workspace, mode: str, how: str
) -> None:
    expected = _brute_force_best(reference)
    request = SearchRequest(QUERY, mode=mode, limit=1, candidates=1,
                            filters=_filters(reference, how))  # fmt: skip
    response = search(corpus, corpus.local_principal(), request)
    assert [r.chunk_id for r in response.results] == [expected]
    assert response.results[0].path == TARGET_PATH
    assert response.stats.scope_chunks == len(_target(reference)[1])
    # Only one target chunk contains query words; the vector channel sees all of them.
    assert response.stats.has_more == (mode != "lexical")


@pytest.mark.parametrize("mode", MODES)
def test_large_scope_uses_the_index_strategy_and_still_excludes_the_rest(
    corpus: Workspace, reference: Workspace, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Force the large-scope path (server: the in-memory matrix; one-shot: the vec0 scan): its
    allow-list is applied before k. (PostgreSQL searches a scope exactly at any size.)"""
    monkeypatch.setattr("kbmcp.store.sqlite.search.plan.VECTOR_EXACT_MAX_ROWS", 0)
    expected = _brute_force_best(reference)
    request = SearchRequest(
        QUERY, mode=mode, limit=1, candidates=1, filters=_filters(reference, "tags")
    )
    response = search(corpus, corpus.local_principal(), request)
    assert [r.chunk_id for r in response.results] == [expected]
    assert response.stats.vector_strategy in ("matrix_exact", "vec0_scan", "pg_exact", None)
    assert (response.stats.vector_strategy is None) == (mode == "lexical")
