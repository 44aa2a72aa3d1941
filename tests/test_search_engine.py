"""Engine internals that must stay exact: the vector cache across writers, stop-word pruning,
strategy choice, excerpts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search import lexical, semantic
from kbmcp.search.excerpt import ELLIPSIS, make_excerpt
from kbmcp.search.lexical import document_tokenizer, drop_stopwords
from kbmcp.search.vector_cache import indexed_vectors
from kbmcp.service.ingest import archive_document
from kbmcp.service.search import search
from kbmcp.service.search_models import SearchFilters, SearchRequest
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest, write_small_corpus


def _paths(ws: Workspace, query: str, **kwargs: object) -> list[str]:
    request = SearchRequest(query, limit=100, **kwargs)  # type: ignore[arg-type]
    return [r.path for r in search(ws, ws.local_principal(), request).results]


def test_vector_cache_follows_writes_from_another_connection(
    workspace: Workspace, db_path: Path, tmp_path: Path
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    assert "late.md" not in _paths(workspace, "zebra crossing", mode="semantic")
    loaded = indexed_vectors(workspace.conn)
    assert loaded is not None and len(loaded.ids) == 6
    other = Workspace(Settings(db_path=db_path, embedder="hash"), embedder=HashingEmbedder())
    try:
        late = tmp_path / "late"
        late.mkdir()
        (late / "late.md").write_text("# Zebra\n\nA zebra crossing is a striped crossing.\n")
        ingest(other, late)
        assert _paths(workspace, "zebra crossing", mode="semantic")[0] == "late.md"
        doc = other.conn.execute("SELECT id FROM document WHERE path = 'late.md'").fetchone()[0]
        archive_document(other.conn, doc)
        assert "late.md" not in _paths(workspace, "zebra crossing", mode="semantic")
    finally:
        other.close()
    cached = indexed_vectors(workspace.conn)
    assert cached is not None and len(cached.ids) == 6


def test_cached_vectors_equal_the_stored_ones(workspace: Workspace, tmp_path: Path) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    cached = indexed_vectors(workspace.conn)
    assert cached is not None
    for chunk_id, row in zip(cached.ids, cached.matrix, strict=True):
        blob = workspace.conn.execute(
            "SELECT embedding FROM chunk_vector WHERE chunk_id = ?", (int(chunk_id),)
        ).fetchone()[0]
        stored = np.frombuffer(blob, dtype=np.float32)
        assert np.allclose(row, stored / np.linalg.norm(stored), atol=1e-6)


def test_index_strategy_matches_exact_on_a_small_corpus(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    scoped = SearchFilters(document_paths=["guide/", "handbook/"])
    request = SearchRequest("rotate keys", mode="semantic", candidates=1, filters=scoped)
    exact = search(workspace, workspace.local_principal(), request)
    monkeypatch.setattr("kbmcp.search.semantic.EXACT_SCAN_MAX_ROWS", 0)
    monkeypatch.setattr("kbmcp.search.semantic.RERANK_MIN", 3)  # re-rank 3 of the 9 chunks
    monkeypatch.setattr("kbmcp.search.semantic.RERANK_PER_RESULT", 1)
    pools = []
    original = semantic._coarse_rows
    monkeypatch.setattr(
        semantic, "_coarse_rows", lambda *a: pools.append(len(out := original(*a))) or out
    )
    coarse = search(workspace, workspace.local_principal(), request)
    assert coarse.stats.vector_strategy == "index" and exact.stats.vector_strategy == "exact"
    assert pools == [3] and exact.stats.scope_chunks == 6
    # The coarse stage may miss (sign bits are an approximation), but what it keeps is re-scored
    # exactly: the reported similarity is the true cosine of that chunk.
    everything = search(workspace, workspace.local_principal(), replace(request, candidates=100))
    true_similarity = {r.chunk_id: r.semantic_similarity for r in everything.results}
    best = coarse.results[0]
    assert best.semantic_similarity == pytest.approx(true_similarity[best.chunk_id])
    # With a pool as large as the scope, the index path returns exactly the exact results.
    monkeypatch.setattr("kbmcp.search.semantic.RERANK_MIN", 9)
    assert search(workspace, workspace.local_principal(), request).results == exact.results


def test_stopwords_are_only_terms_in_more_than_half_the_chunks(
    workspace: Workspace, tmp_path: Path
) -> None:
    folder = tmp_path / "stop"
    folder.mkdir()
    for i in range(10):
        extra = " rare" if i == 0 else ""
        (folder / f"d{i}.txt").write_text(f"common words here number{i}{extra}\n")
    ingest(workspace, folder)
    kept, dropped = drop_stopwords(workspace.conn, ["common", "rare", "absent"], min_rows=0)
    assert kept == ["rare", "absent"] and dropped == ["common"]
    # Nothing rarer that occurs: keep everything rather than search for nothing.
    assert drop_stopwords(workspace.conn, ["common", "absent"], min_rows=0) == (
        ["common", "absent"],
        [],
    )


def test_stopword_pruning_does_not_change_the_lexical_ranking(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    query = "the search scope and the keys"
    monkeypatch.setattr(lexical, "STOPWORD_MIN_ROWS", 10**9)
    full = search(workspace, workspace.local_principal(), SearchRequest(query, mode="lexical"))
    monkeypatch.setattr(lexical, "STOPWORD_MIN_ROWS", 0)
    pruned = search(workspace, workspace.local_principal(), SearchRequest(query, mode="lexical"))
    top = [r.chunk_id for r in pruned.results]
    assert top == [r.chunk_id for r in full.results][: len(top)]


def test_excerpt_centres_on_the_densest_match_and_marks_cuts(workspace: Workspace) -> None:
    text = ("filler " * 80) + "the rotation of keys happens here " + ("tail " * 80)
    tokenize = document_tokenizer(workspace.conn)
    excerpt = make_excerpt(text, {"rotat", "kei"}, tokenize)
    assert "rotation of keys" in excerpt
    assert excerpt.startswith(ELLIPSIS) and excerpt.endswith(ELLIPSIS)
    assert len(excerpt) <= 300 + 40 + 2
    body = excerpt.strip(ELLIPSIS)
    assert not body.startswith(" ") and body in text
    no_match = make_excerpt(text, {"absent"}, tokenize)
    assert no_match.startswith("filler") and no_match.endswith(ELLIPSIS)
    assert make_excerpt("short text", {"x"}, tokenize) == "short text"
