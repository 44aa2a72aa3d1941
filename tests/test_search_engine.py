"""Engine internals that must stay exact: the vector accelerator across writers, stop-word
pruning, strategy choice, excerpts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest
from kbmcp.search.excerpt import ELLIPSIS, make_excerpt
from kbmcp.search.lexical import channel
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.search.query_vector import unit
from kbmcp.search.resolved import SimilarityFloor
from kbmcp.service.ingest import archive_document
from kbmcp.service.search import search
from kbmcp.store.sqlite.search import engine, plan
from kbmcp.store.sqlite.search.lexical.fts import drop_stopwords
from kbmcp.store.sqlite.search.vector import candidates, vec0_scan
from kbmcp.store.sqlite.search.vector.matrix import VectorMatrix
from kbmcp.store.tokenizer import tokenize_document
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest, write_small_corpus


def _paths(ws: Workspace, query: str, **kwargs: object) -> list[str]:
    request = SearchRequest(query, limit=100, **kwargs)  # type: ignore[arg-type]
    return [r.path for r in search(ws, ws.local_principal(), request).results]


def _vectors(ws: Workspace) -> VectorMatrix:
    assert ws.accelerator is not None
    return ws.accelerator.vectors(ws.conn)


@pytest.mark.sqlite_only("sqlite engine: the in-memory search accelerators")
def test_vector_copy_follows_writes_from_another_connection_in_place(
    workspace: Workspace, db_path: Path, tmp_path: Path
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    assert "late.md" not in _paths(workspace, "zebra crossing", mode="semantic")
    loaded = _vectors(workspace)
    assert len(loaded.live_rows()) == 6
    other = Workspace(Settings(db=db_path, embedder="hash"), embedder=HashingEmbedder())
    try:
        late = tmp_path / "late"
        late.mkdir()
        (late / "late.md").write_text("# Zebra\n\nA zebra crossing is a striped crossing.\n")
        ingest(other, late)
        assert _paths(workspace, "zebra crossing", mode="semantic")[0] == "late.md"
        doc = other.conn.execute("SELECT public_id FROM document WHERE path = 'late.md'")
        archive_document(other, other.local_principal(), doc.fetchone()[0])
        assert "late.md" not in _paths(workspace, "zebra crossing", mode="semantic")
    finally:
        other.close()
    # Updated in place (the added document appended, then marked dead), never reloaded.
    assert _vectors(workspace) is loaded
    assert len(loaded.live_rows()) == 6 and len(loaded.ids) == 7


@pytest.mark.sqlite_only("sqlite engine: the in-memory search accelerators")
def test_cached_vectors_equal_the_stored_ones(workspace: Workspace, tmp_path: Path) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    cached = _vectors(workspace)
    for chunk_id, row in zip(cached.ids, cached.matrix, strict=True):
        blob = workspace.conn.execute(
            "SELECT embedding FROM chunk_vector WHERE chunk_id = ?", (int(chunk_id),)
        ).fetchone()[0]
        stored = np.frombuffer(blob, dtype=np.float32)
        assert np.allclose(row, stored / np.linalg.norm(stored), atol=1e-6)


@pytest.mark.sqlite_only("sqlite engine: the in-memory search accelerators")
def test_matrix_pool_holds_the_exact_best_rows_and_their_near_ties(
    workspace: Workspace, tmp_path: Path
) -> None:
    """The in-memory pool is brute force: for every scope it holds the true best `count` rows
    (compared with scoring every stored vector directly), plus rows tied with the last of
    them within the rounding slack that sqlite-vec's re-scoring needs."""
    ingest(workspace, write_small_corpus(tmp_path))
    vectors = _vectors(workspace)
    rng = np.random.default_rng(3)
    for _ in range(20):
        query = unit(rng.standard_normal(vectors.dimension).astype(np.float32))
        assert query is not None
        everything = vectors.ids[vectors.live_rows()]
        for allowed in (None, np.sort(rng.choice(everything, 5, replace=False))):
            ids = everything if allowed is None else allowed
            stored = np.stack([vectors.matrix[np.searchsorted(vectors.ids, i)] for i in ids])
            truth = stored @ query
            best = set(ids[np.argsort(-truth, kind="stable")[:3]].tolist())
            pool, _ = candidates.matrix_pool(vectors, query, allowed, 3, SimilarityFloor())
            assert best <= set(pool.tolist()) and set(pool.tolist()) <= set(ids.tolist())
            cut = np.sort(truth)[-3]
            assert len(pool) == np.count_nonzero(truth >= cut - candidates.ROUNDING_SLACK)


@pytest.mark.sqlite_only("sqlite engine: sqlite-vec's vec0 index")
@pytest.mark.parametrize("vector_pass", ["vec0_scan", "vec0_knn"])
def test_one_shot_vec0_passes_equal_the_exact_scan(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vector_pass: str
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    workspace.long_lived = False  # the plain (SQL) path
    scoped = SearchFilters(document_paths=["guide/", "handbook/"])
    request = SearchRequest("rotate keys", mode="semantic", candidates=2, filters=scoped)
    exact = search(workspace, workspace.local_principal(), request)
    monkeypatch.setattr(plan, "VECTOR_EXACT_MAX_ROWS", 0)
    if vector_pass == "vec0_knn":  # what a vec0 layout the scan does not know gets
        monkeypatch.setattr(engine, "scan_vec0", lambda conn, query: None)
    large = search(workspace, workspace.local_principal(), request)
    assert (exact.stats.vector_strategy, large.stats.vector_strategy) == ("sql_exact", vector_pass)
    assert exact.stats.scope_chunks == 6 and exact.results and large.results == exact.results


@pytest.mark.sqlite_only("sqlite engine: sqlite-vec's vec0 index")
def test_vec0_scan_reads_every_live_vec0_row(workspace: Workspace, tmp_path: Path) -> None:
    """The scan reads sqlite-vec's storage directly: it must see exactly the rows vec0 itself
    answers for (an archived document's rows are cleared in vec0's validity bitmap, not
    removed), with the cosines of the stored vectors."""
    ingest(workspace, write_small_corpus(tmp_path))
    conn = workspace.conn
    archived = conn.execute("SELECT public_id FROM document ORDER BY id LIMIT 1").fetchone()[0]
    archive_document(workspace, workspace.local_principal(), archived)
    query = unit(HashingEmbedder().embed(["rotate signing keys"])[0])
    assert query is not None
    scanned = vec0_scan.scan_vec0(conn, query)
    assert scanned is not None
    live = [row[0] for row in conn.execute("SELECT rowid FROM chunk_vec ORDER BY rowid")]
    everything = conn.execute("SELECT count(*) FROM chunk_vector").fetchone()[0]
    assert sorted(scanned.ids.tolist()) == live and 0 < len(live) < everything
    for chunk_id, score in zip(scanned.ids.tolist(), scanned.scores.tolist(), strict=True):
        blob = conn.execute(
            "SELECT embedding FROM chunk_vector WHERE chunk_id = ?", (chunk_id,)
        ).fetchone()[0]
        vector = np.frombuffer(blob, dtype=np.float32)
        assert score == pytest.approx(float(vector @ query / np.linalg.norm(vector)), abs=1e-6)


@pytest.mark.sqlite_only("sqlite engine: sqlite-vec's vec0 index")
def test_vec0_scan_refuses_a_layout_it_does_not_know(workspace: Workspace, tmp_path: Path) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    query = unit(HashingEmbedder().embed(["rotate signing keys"])[0])
    assert query is not None
    assert vec0_scan.scan_vec0(workspace.conn, query[:100]) is None  # blocks of another size


@pytest.mark.sqlite_only("sqlite engine: FTS5's tables and tokenizer")
def test_stopwords_are_only_terms_in_more_than_half_the_chunks(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "stop"
    folder.mkdir()
    for i in range(10):
        extra = " rare" if i == 0 else ""
        (folder / f"d{i}.txt").write_text(f"common words here number{i}{extra}\n")
    ingest(workspace, folder)
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 0)
    kept, dropped = drop_stopwords(workspace.conn, ["common", "rare", "absent"], None, 100)
    assert kept == ["rare", "absent"] and dropped == ["common"]
    # Nothing rarer that occurs: keep everything rather than search for nothing.
    assert drop_stopwords(workspace.conn, ["common", "absent"], None, 100) == (
        ["common", "absent"],
        [],
    )


@pytest.mark.sqlite_only("sqlite engine: FTS5's tables and tokenizer")
def test_a_phrase_of_common_words_is_never_dropped(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both words are in every chunk, the phrase in 4 of 10: its idf is positive, so dropping
    it (as its rarest word's frequency would suggest) would change the ranking."""
    folder = tmp_path / "stop"
    folder.mkdir()
    for i in range(10):
        text = "common words here" if i < 4 else "words here common"
        (folder / f"d{i}.txt").write_text(f"{text} number{i}{' rare' if i == 0 else ''}\n")
    ingest(workspace, folder)
    terms = ["common words", "rare", "common"]
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 0)
    assert drop_stopwords(workspace.conn, terms, None, 100) == (
        ["common words", "rare"],
        ["common"],
    )


def test_stopword_pruning_does_not_change_the_lexical_ranking(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    workspace.long_lived = False  # pruning is a plan of the FTS5 (plain) path
    query = "the search scope and the keys"
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 10**9)
    full = search(workspace, workspace.local_principal(), SearchRequest(query, mode="lexical"))
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 0)
    pruned = search(workspace, workspace.local_principal(), SearchRequest(query, mode="lexical"))
    top = [r.chunk_id for r in pruned.results]
    assert top == [r.chunk_id for r in full.results][: len(top)]


@pytest.mark.sqlite_only("sqlite engine: FTS5's tables and tokenizer")
def test_excerpt_centres_on_the_densest_match_and_marks_cuts(workspace: Workspace) -> None:
    text = ("filler " * 80) + "the rotation of keys happens here " + ("tail " * 80)
    tokenize = tokenize_document
    excerpt = make_excerpt(text, {"rotat", "kei"}, tokenize)
    assert "rotation of keys" in excerpt
    assert excerpt.startswith(ELLIPSIS) and excerpt.endswith(ELLIPSIS)
    assert len(excerpt) <= 300 + 40 + 2
    body = excerpt.strip(ELLIPSIS)
    assert not body.startswith(" ") and body in text
    no_match = make_excerpt(text, {"absent"}, tokenize)
    assert no_match.startswith("filler") and no_match.endswith(ELLIPSIS)
    assert make_excerpt("short text", {"x"}, tokenize) == "short text"


def test_search_with_a_given_query_vector_equals_embedding_the_query(
    workspace: Workspace, tmp_path: Path
) -> None:
    """The library API (benchmarks, tools with their own embeddings): a query vector given to
    `search` replaces embedding the query text, which still drives the keyword channel."""
    ingest(workspace, write_small_corpus(tmp_path))
    principal = workspace.local_principal()
    embedded = {}
    for mode in ("semantic", "hybrid"):
        request = SearchRequest("rotate keys", mode=mode)
        vector = workspace.embedder.embed(["rotate keys"])[0]
        given = search(workspace, principal, request, query_vector=vector)
        embedded[mode] = search(workspace, principal, request)
        assert given.results and given.results == embedded[mode].results
    other = workspace.embedder.embed(["zebra crossing"])[0]
    moved = search(workspace, principal, SearchRequest("rotate keys", mode="semantic"),
                   query_vector=other)  # fmt: skip
    assert moved.results != embedded["semantic"].results
    with pytest.raises(InvalidRequest, match="dimensions"):
        search(workspace, principal, SearchRequest("x", mode="semantic"), query_vector=[0.1, 0.2])
    with pytest.raises(InvalidRequest, match="finite"):
        search(workspace, principal, SearchRequest("x"), query_vector=[float("nan")] * 384)


@pytest.mark.sqlite_only("sqlite engine: apsw's statement cache")
def test_a_server_answering_many_kinds_of_search_in_turn_keeps_its_statements_prepared(
    workspace: Workspace, tmp_path: Path
) -> None:
    """apsw's statement cache is a ring of the last statement runs (connection.py,
    STATEMENT_CACHE_SIZE): with its default of 100, twelve kinds of search asked in turn (each
    ~13 statements) pushed every ranking statement out before its kind came round again, and
    each search planned it anew (~0.35 ms). After one round, no search prepares anything."""
    ingest(workspace, write_small_corpus(tmp_path))
    principal = workspace.local_principal()
    kinds = [
        SearchRequest("bearer token rotation", mode=mode, limit=limit, filters=filters)
        for mode in ("hybrid", "lexical", "semantic")
        for limit in (5, 50)
        for filters in (SearchFilters(), SearchFilters(document_paths=["handbook/"]))
    ]
    for request in kinds:
        search(workspace, principal, request)
    before = workspace.conn.cache_stats()
    for _ in range(3):
        for request in kinds:
            search(workspace, principal, request)
    after = workspace.conn.cache_stats()
    assert after["hits"] - before["hits"] >= 3 * len(kinds) * 5
    assert after["misses"] == before["misses"]


@pytest.mark.parametrize(
    ("terms", "rows", "scope_rows", "prunes"),
    [
        (2, 1000, None, True),
        (1, 1000, None, False),  # one term is never dropped for another
        (2, 999, None, False),  # below STOPWORD_MIN_ROWS: every term
        (2, 1000, 101, True),
        (2, 1000, 100, False),  # a scope no larger than the depth always falls back
    ],
)
def test_every_path_prunes_under_the_same_conditions(
    terms: int, rows: int, scope_rows: int | None, prunes: bool
) -> None:
    assert channel.STOPWORD_MIN_ROWS == 1000
    assert channel.prunes(terms, rows, scope_rows, depth=100) is prunes
