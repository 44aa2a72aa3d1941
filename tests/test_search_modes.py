"""The four modes, fusion parameters, min_similarity, determinism and hostile query text, on
both store backends (the arithmetic of SQLite's ranking statement, with given candidates, on
SQLite: PostgreSQL's gives the same responses, tests/test_postgres_ranking.py)."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import MODES, SearchFilters, SearchRequest, SearchResponse
from kbmcp.search.query_text import match_expression, query_terms
from kbmcp.search.ranking import WEAK_KEYWORD_SHARE
from kbmcp.service.search import search
from kbmcp.store.sqlite.search.ranking import bound, rank
from kbmcp.workspace import Workspace
from tests.search_corpus import SMALL_CORPUS, ingest, write_small_corpus
from tests.store_backends import rows, workspace_on

QUERY = "how do I rotate keys and search the scope"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """The corpus in an SQLite file: the reference for FTS5's own statistics, and the file the
    ranking statement is tested on with given candidates."""
    root = tmp_path_factory.mktemp("modes")
    workspace = Workspace(Settings(db=root / "kb.db", embedder="hash"), embedder=HashingEmbedder())
    ingest(workspace, write_small_corpus(root))
    yield workspace
    workspace.close()


@pytest.fixture(scope="module")
def ws(
    source: Workspace, module_backend: str, request: pytest.FixtureRequest
) -> Iterator[Workspace]:
    """The corpus on each backend."""
    workspace = workspace_on(module_backend, source.settings.db_path, request)
    yield workspace
    workspace.close()


def _search(ws: Workspace, query: str = QUERY, **kwargs: object) -> SearchResponse:
    return search(ws, ws.local_principal(), SearchRequest(query, **kwargs))  # type: ignore[arg-type]


def _ids(response: SearchResponse) -> list[str]:
    return [r.chunk_id for r in response.results]


def test_keyword_is_an_alias_of_lexical(ws: Workspace) -> None:
    response = _search(ws, mode="keyword")
    assert response.mode == "lexical"
    assert _ids(response) == _ids(_search(ws, mode="lexical"))


def test_lexical_reports_positive_bm25_in_descending_order(ws: Workspace) -> None:
    results = _search(ws, mode="lexical").results
    assert results and all(r.lexical_score > 0 for r in results)
    assert [r.lexical_rank for r in results] == list(range(1, len(results) + 1))
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert all(r.semantic_rank is None for r in results)


def test_semantic_scores_are_cosine_similarities(ws: Workspace) -> None:
    results = _search(ws, mode="semantic").results
    assert results and all(-1 <= r.semantic_similarity <= 1 for r in results)
    assert [r.score for r in results] == [r.semantic_similarity for r in results]
    assert all(r.lexical_rank is None for r in results)


def test_alpha_extremes_equal_the_single_channel_rankings(ws: Workspace) -> None:
    assert _ids(_search(ws, alpha=1.0)) == _ids(_search(ws, mode="lexical"))
    assert _ids(_search(ws, alpha=0.0)) == _ids(_search(ws, mode="semantic"))


def fts5_idf_sum(ws: Workspace, query: str) -> float:
    """The reference ceiling: the sum of FTS5's idf over the query's terms, with N and each
    term's n counted by FTS5 itself (in the SQLite file)."""
    rows = ws.conn.execute("SELECT count(*) FROM chunk_fts").fetchone()[0]
    total = 0.0
    for term in query_terms(query):
        match = match_expression([term])
        query_rows = "SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH ?"
        n = ws.conn.execute(query_rows, (match,)).fetchone()[0]
        idf = math.log((rows - n + 0.5) / (n + 0.5))
        total += idf if idf > 0 else 1e-6  # FTS5 clamps a common term's idf
    return total


# Matches "token" and "a" of the corpus, nothing it asks about: a weak keyword channel.
WEAK_QUESTION = "how do I bake rye bread at home without a token"


@pytest.mark.parametrize("query", [WEAK_QUESTION, QUERY, "rotate"])
def test_hybrid_is_min_max_with_the_keyword_channel_scaled_by_its_strength(
    ws: Workspace, source: Workspace, query: str
) -> None:
    """hybrid = alpha * strength * min-max(bm25) + (1 - alpha) * min-max(cosine), strength =
    min(1, best bm25 / (a quarter of the query's ceiling)). The weak question's best chunk
    matches a small part of it (strength < 1); the others are matched well (strength 1)."""
    lexical = {r.chunk_id: r.score for r in _search(ws, query, mode="lexical", limit=100).results}
    semantic = {r.chunk_id: r.score for r in _search(ws, query, mode="semantic", limit=100).results}
    strength = min(1.0, max(lexical.values()) / (WEAK_KEYWORD_SHARE * fts5_idf_sum(source, query)))
    assert (strength < 1.0) is (query == WEAK_QUESTION)

    def normalised(scores: dict[str, float]) -> dict[str, float]:
        low, high = min(scores.values()), max(scores.values())
        return {k: (v - low) / (high - low) for k, v in scores.items()}

    lex, sem = normalised(lexical), normalised(semantic)
    results = _search(ws, query, alpha=0.3, limit=100).results
    assert results
    for result in results:
        expected = 0.3 * strength * lex.get(result.chunk_id, 0) + 0.7 * sem.get(result.chunk_id, 0)
        assert result.score == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_rrf_sums_reciprocal_ranks_with_the_given_k(ws: Workspace) -> None:
    for k in (1, 60):
        response = _search(ws, mode="rrf", rrf_k=k, limit=100)
        assert response.rrf_k == k
        for r in response.results:
            expected = sum(1 / (k + rank) for rank in (r.lexical_rank, r.semantic_rank) if rank)
            assert r.score == pytest.approx(expected)


def test_rrf_k_defaults_to_the_configured_value(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ws, "settings", replace(ws.settings, rrf_k=7))
    assert _search(ws, mode="rrf").rrf_k == 7


def _fuse(
    ws: Workspace,
    mode: str,
    lexical: list[tuple[int, float]],
    semantic: list[tuple[int, float]],
    *,
    rrf_k: int = 60,
    lexical_ceiling: float = 0.0,
) -> list[tuple[int, float]]:
    """The ranking statement over given candidates ((n, score): the n-th chunk of the file),
    returning the fused order as (n, fused score)."""
    chunk = [row[0] for row in rows(ws, "SELECT id FROM chunk ORDER BY id")]
    sources = [
        bound(name, "given", np.array([chunk[n] for n, _ in pairs], dtype=np.int64),
              np.array([score for _, score in pairs]))
        for name, pairs in (("lexical_candidates", lexical), ("semantic_candidates", semantic))
    ]  # fmt: skip
    lexical_source = replace(sources[0], ceiling=lexical_ceiling)
    ranking = rank(ws.conn, scope_ids=None, lexical=lexical_source, semantic=sources[1],
                   mode=mode, alpha=0.5, rrf_k=rrf_k, depth=100, limit=100)  # fmt: skip
    return [(chunk.index(row.chunk_row_id), row.score) for row in ranking.rows]


def _order(fused: list[tuple[int, float]]) -> list[int]:
    return [n for n, _ in fused]


def test_rrf_k_changes_the_ranking(source: Workspace) -> None:
    """Chunk 0 is first in one channel, chunk 1 fourth in both: a small k favours the top rank
    (1/2 > 2/5), a large one agreement between channels (1/61 < 2/64). (With k = 1, chunks 0,
    2 and 4 tie at 1/2; ties go by public id.)"""
    lexical = [(0, 9.0), (3, 8.0), (4, 7.0), (1, 6.0)]
    semantic = [(2, 0.9), (5, 0.8), (4, 0.7), (1, 0.6)]
    small = _order(_fuse(source, "rrf", lexical, semantic, rrf_k=1))
    assert set(small[:3]) == {0, 2, 4} and small.index(1) > 2
    assert _order(_fuse(source, "rrf", lexical, semantic, rrf_k=60))[:2] == [4, 1]


def test_a_weak_keyword_channel_weighs_what_it_matched_of_the_query(source: Workspace) -> None:
    """Chunk 0 is the keyword channel's only candidate, chunk 1 the vector channel's best. With
    a ceiling of 8, chunk 0's bm25 of 0.8 is a fifth of the quarter (2) that counts as strong:
    it keeps a fifth of the keyword weight (min-max gave it all, and first place); from 2 on,
    all of it."""
    semantic = [(1, 0.6), (0, 0.3), (2, 0.1)]  # min-max: 1.0, 0.4, 0.0
    weak = _fuse(source, "hybrid", [(0, 0.8)], semantic, lexical_ceiling=8.0)
    assert weak == [(1, 0.5), (0, pytest.approx(0.5 * 0.4 + 0.5 * 0.4)), (2, 0.0)]
    before = _fuse(source, "hybrid", [(0, 0.8)], semantic)  # no ceiling: min-max alone
    assert before[0] == (0, pytest.approx(0.5 * 1.0 + 0.5 * 0.4))
    strong = _fuse(source, "hybrid", [(0, 2.0)], semantic, lexical_ceiling=8.0)
    assert strong[0] == (0, pytest.approx(0.5 * 1.0 + 0.5 * 0.4))
    # Several candidates: min-max among them, all scaled by the best one's strength.
    shared = dict(_fuse(source, "hybrid", [(2, 1.0), (3, 0.5), (0, 0.25)], semantic,
                        lexical_ceiling=8.0))  # fmt: skip
    assert shared[2] == pytest.approx(0.5 * 0.5 * 1.0 + 0.5 * 0.0)
    assert shared[3] == pytest.approx(0.5 * 0.5 * (0.25 / 0.75))
    assert shared[0] == pytest.approx(0.5 * 0.0 + 0.5 * 0.4)
    # The other modes ignore the ceiling.
    assert _fuse(source, "lexical", [(0, 0.8)], [], lexical_ceiling=8.0) == [(0, 0.8)]


def test_min_similarity_drops_vector_candidates_but_not_lexical_hits(ws: Workspace) -> None:
    everything = _search(ws, mode="semantic", limit=100).results
    floor = sorted(r.semantic_similarity for r in everything)[len(everything) // 2]
    kept = _search(ws, mode="semantic", limit=100, min_similarity=floor).results
    assert kept and all(r.semantic_similarity >= floor for r in kept)
    assert len(kept) < len(everything)
    hybrid = _search(ws, limit=100, min_similarity=0.99).results
    assert hybrid and all(r.semantic_rank is None and r.lexical_rank for r in hybrid)


def test_ties_are_broken_by_chunk_id(source: Workspace) -> None:
    public = [row[0] for row in rows(source, "SELECT public_id FROM chunk ORDER BY id")]
    tied = _order(_fuse(source, "lexical", [(1, 1.0), (2, 1.0), (3, 1.0)], []))
    assert [public[n] for n in tied] == sorted(public[n] for n in (1, 2, 3))


def test_results_are_deterministic(ws: Workspace) -> None:
    for mode in MODES:
        first, second = _search(ws, mode=mode), _search(ws, mode=mode)
        assert first.results == second.results


def test_results_cite_their_source(ws: Workspace) -> None:
    for r in _search(ws, limit=100).results:
        [(content,)] = rows(ws, "SELECT content FROM revision WHERE public_id = ?",
                            r.citation.revision_id)  # fmt: skip
        text = content[r.citation.char_start : r.citation.char_end]
        assert r.excerpt.strip("…").strip() in text
        assert len(r.excerpt) <= 300 + 2 * 20 + 2
        assert content.count("\n", 0, r.citation.char_start) + 1 == r.citation.line_start
        assert r.citation.path == r.path and r.revision_id == r.citation.revision_id


def test_has_more_and_stats(ws: Workspace) -> None:
    response = _search(ws, limit=1)
    assert response.stats.results == 1 and response.stats.has_more
    assert response.stats.lexical_candidates > 0 and response.stats.semantic_candidates > 0
    assert response.stats.scope_chunks is None
    scoped = _search(ws, limit=100, filters=SearchFilters(document_paths=["guide/"]))
    assert scoped.stats.scope_chunks == len({r.chunk_id for r in _search(
        ws, mode="semantic", limit=100, filters=SearchFilters(document_paths=["guide/"])
    ).results})  # fmt: skip
    assert not scoped.stats.has_more


def _assert_well_formed(response: SearchResponse, query: str, mode: str) -> None:
    """A response that answers `query` (stripped) in `mode`: results from the corpus, ordered by
    score, ranked within the candidates each channel reports, and stats that count them."""
    results, stats = response.results, response.stats
    assert (response.query, response.mode) == (query.strip(), mode)
    assert stats.results == len(results) <= stats.limit
    assert len(results) == stats.limit or not stats.has_more
    assert len({r.chunk_id for r in results}) == len(results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    for r in results:
        assert r.path in SMALL_CORPUS and r.citation.path == r.path
        assert r.citation.revision_id == r.revision_id
        assert r.lexical_rank is not None or r.semantic_rank is not None
        if r.lexical_rank is not None:
            assert 1 <= r.lexical_rank <= stats.lexical_candidates
        if r.semantic_rank is not None:
            assert 1 <= r.semantic_rank <= stats.semantic_candidates
            assert -1 <= r.semantic_similarity <= 1
    if mode == "lexical":
        assert all(r.semantic_rank is None for r in results)
        assert len(results) == min(stats.lexical_candidates, stats.limit)
    if mode == "semantic":
        assert all(r.lexical_rank is None for r in results)


def _lexical_paths(response: SearchResponse) -> set[str]:
    return {r.path for r in response.results if r.lexical_rank is not None}


def _has_token_characters(text: str) -> bool:
    """Whether FTS5's unicode61 tokenizer finds a token in `text` (letters, numbers and private
    use characters; combining marks counted too, to be safe)."""
    return any(unicodedata.category(c)[0] in "LNM" or unicodedata.category(c) == "Co" for c in text)


# Each hostile query with the document its words appear in (None: they appear nowhere, or the
# query has no word characters at all). Operators and quotes are ordinary text: `AND`, `OR NOT`,
# `a*` and `title:` find documents with those words instead of acting on the query.
HOSTILE_QUERIES = {
    "sqlite-vec": "guide/cpp.txt",
    "C++": "guide/cpp.txt",
    "what's": "guide/cpp.txt",
    '"unbalanced': None,
    "AND": "guide/search.md",
    "NEAR(": None,
    "🚀": None,
    "OR NOT": "handbook/backups.md",
    "col:umn": None,
    "a*": "handbook/keys.md",
    "^start": None,
    "(((": None,
    '""': None,
    "-": None,
    "title: keys": "handbook/keys.md",
    "\x00": None,
    "NEAR(a b, 3)": None,
}


@pytest.mark.parametrize("query", list(HOSTILE_QUERIES))
@pytest.mark.parametrize("mode", MODES)
def test_hostile_queries_are_ordinary_text(ws: Workspace, query: str, mode: str) -> None:
    response = _search(ws, query, mode=mode)
    _assert_well_formed(response, query, mode)
    found_in = HOSTILE_QUERIES[query]
    if mode == "semantic":
        return  # the keyword channel does not run
    if found_in is None:
        assert response.stats.lexical_candidates == 0 and not _lexical_paths(response)
    else:
        assert found_in in _lexical_paths(response)


def test_punctuation_queries_still_run_the_vector_channel(ws: Workspace) -> None:
    response = _search(ws, "🚀 ???")
    assert response.stats.lexical_candidates == 0
    assert query_terms("🚀 ???") == [] and match_expression([]) is None


def test_hyphenated_terms_are_phrases(ws: Workspace) -> None:
    assert match_expression(query_terms('sqlite-vec "x" sqlite-VEC')) == '"sqlite-vec" OR "x"'
    assert match_expression(query_terms('sqlite-vec "x')) == '"sqlite-vec" OR """x"'
    hits = _search(ws, "sqlite-vec", mode="lexical").results
    assert [r.path for r in hits] == ["guide/cpp.txt"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(min_size=1, max_size=60).filter(lambda q: q.strip()))
def test_generated_text_never_raises(ws: Workspace, query: str) -> None:
    """Any text is a well-formed search, and never hides an ordinary word beside it."""
    for mode in ("lexical", "hybrid"):
        response = _search(ws, query, mode=mode)
        _assert_well_formed(response, query, mode)
        if not _has_token_characters(query):
            assert response.stats.lexical_candidates == 0
        beside_a_word = f"{query} rotate"
        response = _search(ws, beside_a_word, mode=mode, limit=100)
        _assert_well_formed(response, beside_a_word, mode)
        assert "handbook/keys.md" in _lexical_paths(response)
