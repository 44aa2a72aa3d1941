"""The scope scan's token cache (kbmcp/store/sqlite/search/lexical/tokens.py): chunks kept end to
end in shared arrays and gathered with numpy must give exactly the tokens each chunk was added
with, through forgetting documents, re-adding chunks and compaction."""

from __future__ import annotations

import numpy as np
import pytest

from kbmcp.store.sqlite.search.lexical import tokens
from kbmcp.store.sqlite.search.lexical.tokens import ChunkTokens, TokenCache


def _chunk(rng: np.random.Generator) -> ChunkTokens:
    sizes = rng.integers(0, 6, size=3)
    columns = np.repeat(np.arange(3, dtype=np.int8), sizes)
    return ChunkTokens(rng.integers(0, 50, size=int(sizes.sum())).astype(np.int32), columns,
                       sizes.astype(np.int64))  # fmt: skip


def _assert_gathers(cache: TokenCache, expected: dict[int, ChunkTokens], ids: list[int]) -> None:
    """`gather` equals the plain reference: each chunk's own arrays, concatenated in order."""
    gathered = cache.gather(ids)
    assert gathered is not None
    chunks = [expected[i] for i in ids]
    assert gathered.token_ids.tolist() == [t for c in chunks for t in c.token_ids.tolist()]
    assert gathered.columns.tolist() == [t for c in chunks for t in c.columns.tolist()]
    assert gathered.lengths.tolist() == [len(c.token_ids) for c in chunks]
    assert gathered.sizes.tolist() == [c.sizes.tolist() for c in chunks]
    for i in ids:
        got = cache.get(i)
        assert got is not None and got.token_ids.tolist() == expected[i].token_ids.tolist()


@pytest.mark.parametrize("max_tokens", [10_000, 120])
def test_gather_equals_the_chunks_added(monkeypatch: pytest.MonkeyPatch, max_tokens: int) -> None:
    """120 stored tokens at most: adds compact (dead slices dropped) or clear the cache."""
    monkeypatch.setattr(tokens, "MAX_TOKENS", max_tokens)
    rng = np.random.default_rng(7)
    cache = TokenCache()
    expected: dict[int, ChunkTokens] = {}
    for step in range(300):
        chunk_id = int(rng.integers(0, 40))
        if step % 7 == 3 and expected:  # a document changed: its chunks are forgotten
            gone = {chunk_id % 5}
            cache.forget_documents(gone)
            expected = {c: t for c, t in expected.items() if c % 5 not in gone}
        chunk = _chunk(rng)
        cache.add(chunk_id, chunk_id % 5, chunk)
        expected[chunk_id] = chunk
        held = [c for c in expected if c in cache]
        expected = {c: expected[c] for c in held}  # a clear drops every chunk
        assert chunk_id in cache and len(cache) == len(expected)
        order = [int(c) for c in rng.permutation(held)]
        _assert_gathers(cache, expected, order + order[:2])  # any order, repeats too
        assert cache.live_tokens == sum(len(t.token_ids) for t in expected.values())
        assert cache.gather([*held, 99]) is None  # one chunk not cached: nothing
    assert cache.gather([]) is not None


def test_a_full_cache_drops_dead_slices_and_keeps_live_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "MAX_TOKENS", 100)
    cache = TokenCache()
    ten = ChunkTokens(np.arange(10, dtype=np.int32), np.zeros(10, np.int8), np.array([0, 0, 10]))
    for chunk_id in range(8):
        cache.add(chunk_id, chunk_id, ten)
    cache.forget_documents(set(range(6)))  # 60 of 80 stored tokens dead
    for chunk_id in range(10, 13):  # the third add would pass 100: the dead slices go
        cache.add(chunk_id, chunk_id, ten)
    assert sorted(cache.document_of) == [6, 7, 10, 11, 12]
    assert cache.live_tokens == 50 and cache._used == 50
    _assert_gathers(cache, dict.fromkeys([6, 7, 10, 11, 12], ten), [12, 6, 11, 7, 10])
