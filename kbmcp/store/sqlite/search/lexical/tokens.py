"""Accelerator: tokenised chunks for the scope scan (scan.py), kept while their text is unchanged.

Why: the scan of a 100-chunk scope spent most of its ~3 ms tokenising the same ~9k tokens again
and walking them in Python; a server asked about one folder scans the same chunks query after
query. Each chunk's tokens are kept as int32 ids into the accelerator's vocabulary, with the
column of each token and the chunk's per-column sizes (already checked against FTS5's docsize
when first tokenised).

Layout: every cached chunk's tokens lie in one array (and their columns in a parallel one), a
chunk being a slice of it, so a repeat scan of 1,000 one-chunk documents gathers its tokens
with a few numpy calls (`gather`) instead of concatenating 1,000 small arrays (a 1% scope of
100k one-chunk documents: ~3 ms of Python per query before).

Freshness: a chunk's indexed text includes its document's title, so the owning accelerator
(search/accelerator.py) forgets the chunks of every document the index change log names; their
slices stay in the arrays, dead, until the arrays are compacted. Memory: ~5 bytes per stored
token plus the vocabulary; above MAX_TOKENS stored tokens the dead slices are dropped, and when
the live ones alone exceed half of it every chunk is (the vocabulary stays, so ids a caller
already holds keep their meaning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kbmcp.store.sqlite.search.growth import capacity_for, grown

MAX_TOKENS = 4_000_000  # ~20 MB of arrays: ~45k chunks of ~90 tokens
COLUMNS = 3  # title, heading, body


@dataclass(frozen=True)
class ChunkTokens:
    token_ids: np.ndarray  # int32 vocabulary ids, in text order (title, heading, body)
    columns: np.ndarray  # int8 column of each token
    sizes: np.ndarray  # int64 (3,): tokens per column, equal to FTS5's docsize record


@dataclass(frozen=True)
class GatheredTokens:
    """The tokens of several chunks, laid end to end in the order asked for."""

    token_ids: np.ndarray  # int32
    columns: np.ndarray  # int8
    lengths: np.ndarray  # int64: tokens per chunk
    sizes: np.ndarray  # int64 (chunks, 3)


@dataclass
class TokenCache:
    vocabulary: dict[str, int] = field(default_factory=dict)
    document_of: dict[int, int] = field(default_factory=dict)  # chunk id -> document id
    # chunk id -> its slot: its tokens are _tokens[_starts[slot] : _starts[slot] + _lengths[slot]]
    _slot_of: dict[int, int] = field(default_factory=dict)
    _tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    _columns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    _used: int = 0  # tokens stored, dead slices included
    _starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    _lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    _sizes: np.ndarray = field(default_factory=lambda: np.zeros((0, COLUMNS), np.int64))
    _slots: int = 0  # slots used, dead ones included
    live_tokens: int = 0

    def token_ids(self, tokens: list[str]) -> np.ndarray:
        """Vocabulary ids of `tokens`, adding new ones."""
        vocabulary = self.vocabulary
        return np.fromiter(
            (vocabulary.setdefault(token, len(vocabulary)) for token in tokens),
            dtype=np.int32,
            count=len(tokens),
        )

    def __contains__(self, chunk_id: int) -> bool:
        return chunk_id in self._slot_of

    def __len__(self) -> int:
        return len(self._slot_of)

    def get(self, chunk_id: int) -> ChunkTokens | None:
        slot = self._slot_of.get(chunk_id)
        if slot is None:
            return None
        start, stop = self._starts[slot], self._starts[slot] + self._lengths[slot]
        return ChunkTokens(
            self._tokens[start:stop].copy(), self._columns[start:stop].copy(),
            self._sizes[slot].copy(),
        )  # fmt: skip

    def gather(self, chunk_ids: list[int]) -> GatheredTokens | None:
        """The tokens of these chunks, in this order; None unless every one is cached."""
        slot_of = self._slot_of
        try:
            slots = np.fromiter(
                (slot_of[i] for i in chunk_ids), dtype=np.int64, count=len(chunk_ids)
            )
        except KeyError:
            return None
        starts, lengths = self._starts[slots], self._lengths[slots]
        # Each chunk's token positions: its start, then +1 for each following token.
        offsets = np.cumsum(lengths) - lengths
        positions = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(
            starts - offsets, lengths
        )
        return GatheredTokens(
            self._tokens[positions], self._columns[positions], lengths, self._sizes[slots]
        )

    def add(self, chunk_id: int, document_id: int, chunk: ChunkTokens) -> None:
        count = len(chunk.token_ids)
        if self._used + count > MAX_TOKENS:
            self._compact(keep=self.live_tokens + count <= MAX_TOKENS // 2)
        if chunk_id in self._slot_of:
            self._forget(chunk_id)
        start = self._used
        if start + count > len(self._tokens):
            capacity = capacity_for(len(self._tokens), start + count)
            self._tokens = grown(self._tokens, capacity)
            self._columns = grown(self._columns, capacity)
        self._tokens[start : start + count] = chunk.token_ids
        self._columns[start : start + count] = chunk.columns
        self._used += count
        slot = self._slots
        if slot == len(self._starts):
            capacity = capacity_for(slot, slot + 1)
            self._starts = grown(self._starts, capacity)
            self._lengths = grown(self._lengths, capacity)
            self._sizes = grown(self._sizes, capacity)
        self._starts[slot], self._lengths[slot], self._sizes[slot] = start, count, chunk.sizes
        self._slots += 1
        self._slot_of[chunk_id] = slot
        self.document_of[chunk_id] = document_id
        self.live_tokens += count

    def forget_documents(self, document_ids: set[int]) -> None:
        """Drop the chunks of these documents (their title, or the chunks themselves, changed)."""
        for chunk_id in [c for c, d in self.document_of.items() if d in document_ids]:
            self._forget(chunk_id)

    def _forget(self, chunk_id: int) -> None:
        slot = self._slot_of.pop(chunk_id)
        del self.document_of[chunk_id]
        self.live_tokens -= int(self._lengths[slot])

    def _compact(self, keep: bool) -> None:
        """Drop the dead slices (keep=True) or every chunk."""
        chunk_ids = list(self._slot_of) if keep else []
        documents = [self.document_of[c] for c in chunk_ids]
        gathered = self.gather(chunk_ids)
        assert gathered is not None
        self._slot_of, self.document_of = {}, {}
        self._used = self._slots = self.live_tokens = 0
        ends = np.cumsum(gathered.lengths)
        for i, (chunk_id, document_id) in enumerate(zip(chunk_ids, documents, strict=True)):
            start, stop = int(ends[i] - gathered.lengths[i]), int(ends[i])
            chunk = ChunkTokens(
                gathered.token_ids[start:stop], gathered.columns[start:stop], gathered.sizes[i]
            )
            self.add(chunk_id, document_id, chunk)
