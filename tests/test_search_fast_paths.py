"""Each fast path of the search engine equals its plain reference.

The fast paths exist for cost only (docs/search.md, "Performance"): whatever they compute must be
exactly what the straightforward version computes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbmcp.clock import format_timestamp, now
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search import excerpt
from kbmcp.search.excerpt import make_excerpt, make_excerpts
from kbmcp.search.matches import (
    ANCHOR_TRIMMED,
    QueryMatches,
    Tokenize,
    anchor,
    reference_matches,
)
from kbmcp.search.models import MODES, SearchFilters, SearchRequest
from kbmcp.search.text_tokens import TextTokenCache
from kbmcp.service import memories
from kbmcp.service.search import search
from kbmcp.store.sqlite.search.ranking import ChannelSource, bound, rank
from kbmcp.store.sqlite.search.vector import matrix as vector_matrix
from kbmcp.store.sqlite.search.vector.matrix import FULL_PASS_BLOCK_ELEMENTS, all_similarities
from kbmcp.store.tokenizer import tokenize_document
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest, write_small_corpus


@pytest.mark.parametrize("rows", [0, 1, 5, 683, 2049, 5183])
@pytest.mark.parametrize("dimension", [3, 384, 1024])
def test_all_similarities_equal_row_by_row_products_in_small_blas_calls(
    rows: int, dimension: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(rows + dimension)
    matrix = rng.standard_normal((rows, dimension)).astype(np.float32)
    query = rng.standard_normal(dimension).astype(np.float32)
    calls: list[int] = []
    real_matmul = np.matmul

    def counting_matmul(a: np.ndarray, b: np.ndarray, **kwargs: object) -> np.ndarray:
        calls.append(a.size)
        return real_matmul(a, b, **kwargs)

    monkeypatch.setattr(vector_matrix.np, "matmul", counting_matmul)
    got = all_similarities(matrix, query)
    monkeypatch.undo()
    reference = np.array([np.dot(row, query) for row in matrix], dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == (rows,)
    # BLAS may sum in another order than np.dot: equal to float32 rounding.
    assert np.allclose(got, reference, rtol=1e-5, atol=1e-5 * np.sqrt(dimension))
    # Every call small enough to run on the calling thread, and every row scored once.
    assert all(size <= max(FULL_PASS_BLOCK_ELEMENTS, dimension) for size in calls)
    assert sum(calls) == matrix.size


# --- Excerpts: the query's matches found without tokenising whole texts (search/matches.py).

SUFFIXES = (  # noqa: SIM905 - a word list reads better as text
    "s es sses ies ss ed eed ing at ate bl ble iz ize y ly ational tional enci anci izer logi bli "
    "alli entli eli ousli ization ation ator alism iveness fulness ousness aliti iviti biliti "
    "icate ative alize iciti ical ful ness al ance ence er ic able ible ant ement ment ent ion "
    "sion tion ou ism iti ous ive e ll"
).split()
STEMS = (  # noqa: SIM905 - a word list reads better as text
    "a b c y ab ba by ey hop fil happ sens possib rel gener conflat troubl siz fall hiss tann "
    "control roll agree plaster motor sing cr bl tr ag orch dr spr oy  x q z mob stab"
).split()


@pytest.fixture(scope="module")
def tokenize() -> Tokenize:
    return tokenize_document


def _tokens_of(tokenize: Tokenize, words: list[str]) -> list[str]:
    tokens = [token for _, _, token, *_ in tokenize(" ".join(words).encode())]
    assert len(tokens) == len(words)
    return tokens


def test_ascii_words_are_letters_and_digits_folded_to_lower_case(tokenize: Tokenize) -> None:
    for code in range(1, 128):
        character = chr(code)
        tokens = [token for _, _, token, *_ in tokenize(f"a{character}B".encode())]
        expected = [f"a{character.lower()}b"] if character.isalnum() else ["a", "b"]
        assert tokens == expected, repr(character)


def test_every_ascii_word_starts_with_the_anchor_of_its_token(tokenize: Tokenize) -> None:
    """Porter rewrites only the end of a word, and the one character it may change besides
    removing a suffix becomes e, i or l: every word of up to four letters, and stems followed by
    one or two of porter's suffixes (every rule, chained)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [""]
    everything: list[str] = []
    for _ in range(4):
        words = [word + letter for word in words for letter in letters]
        everything.extend(words)
    everything += [stem + a + b for stem in STEMS for a in ["", *SUFFIXES] for b in SUFFIXES]
    everything += ["x" * 70 + "ing", "0ies", "12ing", "a1ational"]  # long, digits
    tokens = _tokens_of(tokenize, everything)
    wrong = [(w, t) for w, t in zip(everything, tokens, strict=True) if not w.startswith(anchor(t))]
    assert not wrong, wrong[:10]
    # The anchor is not a weaker rule than needed: each trimmed letter does occur.
    changed = {t[-1] for w, t in zip(everything, tokens, strict=True) if not w.startswith(t)}
    assert changed == set(ANCHOR_TRIMMED)


# Words of every kind the fast path treats differently: ASCII, folded non-ASCII letters, a
# combining diacritic, non-ASCII separators, digits, WORD_MARK itself, long words.
WORDS = [
    "running",
    "runs",
    "run",
    "The",
    "THE",
    "of",
    "keys",
    "key",
    "rotate",
    "rotation",
    "happy",
    "happiness",
    "sensibility",
    "relational",
    "relate",
    "hoping",
    "hope",
    "café",
    "cafe",
    "Müller",
    "muller",
    "straße",
    "strasse",
    "αβγ",
    "β-cell",
    "e\u0301toile",
    "\u0301lead",
    "中文",
    "İstanbul",
    "ﬁle",
    "sqlite-vec",
    "C++",
    "what's",
    "0.76",
    "p53",
    "x" * 70,
    "a_b",
    "foo\x01bar",
    "🚀",
    "“quoted”",
    "dash–dash",
    "non\u00a0breaking",
    "ends.",
    "(paren)",
    "naïve",
]
KEPT_ACROSS_EXAMPLES = TextTokenCache()
SEPARATORS = [" ", " ", " ", "\n", ", ", ". ", " – ", "\u3000", "\x01", "/"]


@given(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=120),
    st.lists(st.sampled_from(SEPARATORS), min_size=120, max_size=120),
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=6),
    st.sampled_from([20, 60, 300]),
)
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_excerpts_equal_the_reference(
    tokenize: Tokenize, words: list[str], separators: list[str], query: list[str], size: int
) -> None:
    text = "".join(word + separator for word, separator in zip(words, separators, strict=False))
    query_tokens = {t for _, _, t, *_ in tokenize(" ".join(query).encode())}
    texts = [text, text[len(text) // 3 :], "short"]
    fast = make_excerpts(texts, query_tokens, tokenize, size)
    reference = [make_excerpt(t, query_tokens, tokenize, size) for t in texts]
    assert fast == reference
    found = QueryMatches(query_tokens, tokenize).of(texts)
    assert found == [reference_matches(t, query_tokens, tokenize) for t in texts]
    # From kept tokens: the first text returned a second time (kept) beside two returned for the
    # first time; then all three kept. One cache over every example: a vocabulary of many texts.
    kept = KEPT_ACROSS_EXAMPLES.of_tenant(1)
    for batch in ([text], [text, texts[1], "short"], texts):
        assert make_excerpts(batch, query_tokens, tokenize, size, kept=kept) == [
            reference[texts.index(t)] for t in batch
        ]


@pytest.mark.parametrize("grid_elements", [excerpt.WINDOW_GRID_ELEMENTS, 50])
def test_excerpts_of_real_prose_equal_the_reference(
    tokenize: Tokenize, grid_elements: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository's own documentation as chunks, each queried with words of another; the
    window choice's grid whole, and a few tokens at a time (a long query over long texts)."""
    monkeypatch.setattr(excerpt, "WINDOW_GRID_ELEMENTS", grid_elements)
    chunks = _prose_chunks()
    assert len(chunks) > 50
    for i in range(0, len(chunks), 7):
        query = " ".join(chunks[(i * 31) % len(chunks)].split()[:12])
        query_tokens = {t for _, _, t, *_ in tokenize(query.encode())}
        batch = chunks[i : i + 20]
        assert make_excerpts(batch, query_tokens, tokenize, 120) == [
            make_excerpt(t, query_tokens, tokenize, 120) for t in batch
        ]


def _prose_chunks() -> list[str]:
    return [
        part
        for path in sorted((Path(__file__).parent.parent / "docs").glob("*.md"))
        for part in path.read_text(encoding="utf-8").split("\n\n")
        if len(part) > 100
    ]


@pytest.mark.parametrize("max_bytes", [64 * 1024 * 1024, 60_000, 2_000])
def test_excerpts_from_kept_tokens_equal_the_reference(tokenize: Tokenize, max_bytes: int) -> None:
    """Overlapping batches of prose through one cache: texts returned for the first time, kept
    the second, found from their tokens afterwards; a small bound evicts entries (60 kB) or
    starts the vocabulary over (2 kB) without changing an excerpt."""
    chunks = _prose_chunks()
    cache = TextTokenCache(max_bytes)
    kept = cache.of_tenant(7)
    for round_ in range(3):
        for i in range(0, len(chunks), 9):
            query = " ".join(chunks[(i * 31 + round_) % len(chunks)].split()[:12])
            query_tokens = {t for _, _, t, *_ in tokenize(query.encode())}
            batch = chunks[i : i + 12]
            assert make_excerpts(batch, query_tokens, tokenize, 120, kept=kept) == [
                make_excerpt(t, query_tokens, tokenize, 120) for t in batch
            ]
            assert cache.size_bytes <= max_bytes
    assert cache.tokenised >= len(chunks) // 2
    if max_bytes < 100_000:
        assert len(cache) < len(chunks)  # the bound held by evicting


def test_kept_tokens_under_concurrent_searches() -> None:
    """A server's request threads share one cache: six threads over overlapping batches, with a
    bound small enough that entries are evicted and the vocabulary starts over while others
    search, each get the reference's excerpts (every thread tokenises with its own tokenizer,
    as the store's `document_tokenizer` does)."""
    chunks = _prose_chunks()[:120]
    cache = TextTokenCache(40_000)
    failures: list[BaseException] = []

    def searches(tenant: int) -> None:
        kept = cache.of_tenant(tenant % 2)
        try:
            for i in range(0, len(chunks), 3):
                query = " ".join(chunks[(i * 7 + tenant) % len(chunks)].split()[:8])
                query_tokens = {t for _, _, t, *_ in tokenize_document(query.encode())}
                batch = chunks[i : i + 15]
                expected = [make_excerpt(t, query_tokens, tokenize_document, 120) for t in batch]
                got = make_excerpts(batch, query_tokens, tokenize_document, 120, kept=kept)
                assert got == expected
        except BaseException as error:  # re-raised on the test's thread
            failures.append(error)

    threads = [threading.Thread(target=searches, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]
    assert cache.tokenised > 0 and cache.size_bytes <= 40_000


def test_kept_tokens_are_per_tenant(tokenize: Tokenize) -> None:
    """A tenant's search never finds another tenant's entries: its time does not tell which
    texts another tenant's searches returned."""
    text = "Rotate the signing keys before the backups run. " * 20
    query_tokens = {t for _, _, t, *_ in tokenize(b"rotate keys")}
    cache = TextTokenCache()
    alice, bob = cache.of_tenant(1), cache.of_tenant(2)
    expected = [make_excerpt(text, query_tokens, tokenize)]
    for _ in range(3):
        assert make_excerpts([text], query_tokens, tokenize, kept=alice) == expected
    assert (cache.tokenised, cache.holds(1, text), cache.holds(2, text)) == (1, True, False)
    assert make_excerpts([text], query_tokens, tokenize, kept=bob) == expected
    assert (cache.tokenised, cache.holds(2, text)) == (1, False)  # first time for Bob
    assert make_excerpts([text], query_tokens, tokenize, kept=bob) == expected
    assert (cache.tokenised, cache.holds(2, text)) == (2, True)


# --- The ranking statement: candidates bound as JSON, citations joined for the limit only.


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bound_candidates_equal_the_row_by_row_json(dtype: type) -> None:
    rng = np.random.default_rng(5)
    ids = np.sort(rng.choice(10**12, 500, replace=False)).astype(np.int64)
    scores = (rng.standard_normal(500) * 10.0 ** rng.integers(-8, 8, 500)).astype(dtype)
    source = bound("lexical_candidates", "postings", ids, scores)
    reference = json.dumps([[int(i), float(s)] for i, s in zip(ids, scores, strict=True)])
    assert source.params == {"lexical_candidates": reference}
    assert bound("x", "postings", ids[:0], scores[:0]).params == {"x": "[]"}


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """Documents and memories (a store with tags), the server's workspace."""
    root = tmp_path_factory.mktemp("fast_paths")
    settings = Settings(db=root / "kb.db", embedder="hash", recency_half_life_days=30.0)
    with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as ws:
        ingest(ws, write_small_corpus(root))
        owner = ws.local_principal()
        team = memories.create_memory_store(ws, owner, "team", tags={"team": "search"})
        for index, text in enumerate(MEMORY_TEXTS):
            store = team.memory_store_id if index % 2 else None
            memories.remember(ws, owner, text, memory_store_id=store)
        yield ws


MEMORY_TEXTS = [
    "Remember: rotate keys before the vector index backups run.",
    "The search team keeps sqlite-vec pinned; keys rotate monthly.",
    "Scope filters apply before ranking, then the limit: rotate the keys.",
    "Backups of the index run nightly.",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "filters",
    [
        SearchFilters(),
        SearchFilters(include_memories=False),
        SearchFilters(tags={"team": "search"}),
    ],
)
def test_every_limit_returns_the_head_of_the_whole_order(
    searched: Workspace, mode: str, filters: SearchFilters, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Citations are joined for the limit's rows only: the first k results of any limit are the
    first k of the whole order (every fused chunk: the corpus is smaller than the limit 100),
    memories decayed by age, documents not."""
    monkeypatch.setenv("KBMCP_NOW", format_timestamp(now() + timedelta(days=10)))
    principal = searched.local_principal()
    for query in ["rotate keys", "vector index backups", "keys"]:
        whole = search(
            searched, principal, SearchRequest(query, mode=mode, limit=100, filters=filters)
        )
        assert whole.results and not whole.stats.has_more
        if filters.include_memories is None and mode != "lexical":
            assert {r.kind for r in whole.results} == {"document", "memory"}
        for result in whole.results:
            assert (result.recency_weight is not None) == (result.kind == "memory")
        count = len(whole.results)
        for limit in sorted({1, 2, 3, count // 2, count - 1, count} - {0}):
            head = search(
                searched, principal, SearchRequest(query, mode=mode, limit=limit, filters=filters)
            )
            assert head.results == whole.results[:limit]
            assert head.stats.has_more == (limit < len(whole.results))


@pytest.mark.parametrize("limit", [0, 101, "10; DROP TABLE chunk", 2.5])
def test_rank_writes_only_a_checked_int_limit_into_the_sql(
    searched: Workspace, limit: object
) -> None:
    """The limit is a literal of the ranking statement (a bound one made it twice as slow), so
    anything but an int from 1 to MAX_LIMIT is refused before any SQL is made."""
    with pytest.raises(ValueError, match="limit must be an int"):
        rank(
            searched.conn,
            scope_ids=None,
            lexical=ChannelSource.off(),
            semantic=ChannelSource.off(),
            mode="hybrid",
            alpha=0.5,
            rrf_k=60,
            depth=100,
            limit=limit,  # type: ignore[arg-type]
        )
