"""Accelerator: tokenised chunks for the scope scan (scan.py), kept while their text is unchanged.

Why: the scan of a 100-chunk scope spent most of its ~3 ms tokenising the same ~9k tokens again
and walking them in Python; a server asked about one folder scans the same chunks query after
query. Each chunk's tokens are kept as int32 ids into the accelerator's vocabulary, with the
column of each token and the chunk's per-column sizes (already checked against FTS5's docsize
when first tokenised), so a repeat scan only concatenates arrays.

Freshness: a chunk's indexed text includes its document's title, so the owning accelerator
(search/accelerator.py) forgets the chunks of every document the index change log names.
Memory: ~5 bytes per cached token plus the vocabulary; above MAX_TOKENS the chunks are dropped
(the vocabulary stays, so ids a caller already holds keep their meaning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_TOKENS = 4_000_000  # ~20 MB of arrays: ~45k chunks of ~90 tokens


@dataclass(frozen=True)
class ChunkTokens:
    token_ids: np.ndarray  # int32 vocabulary ids, in text order (title, heading, body)
    columns: np.ndarray  # int8 column of each token
    sizes: np.ndarray  # int64 (3,): tokens per column, equal to FTS5's docsize record


@dataclass
class TokenCache:
    vocabulary: dict[str, int] = field(default_factory=dict)
    chunks: dict[int, ChunkTokens] = field(default_factory=dict)
    document_of: dict[int, int] = field(default_factory=dict)  # chunk id -> document id
    size: int = 0  # cached tokens

    def token_ids(self, tokens: list[str]) -> np.ndarray:
        """Vocabulary ids of `tokens`, adding new ones."""
        vocabulary = self.vocabulary
        return np.fromiter(
            (vocabulary.setdefault(token, len(vocabulary)) for token in tokens),
            dtype=np.int32,
            count=len(tokens),
        )

    def add(self, chunk_id: int, document_id: int, chunk: ChunkTokens) -> None:
        if self.size + len(chunk.token_ids) > MAX_TOKENS:
            self.chunks.clear()
            self.document_of.clear()
            self.size = 0
        self.chunks[chunk_id] = chunk
        self.document_of[chunk_id] = document_id
        self.size += len(chunk.token_ids)

    def forget_documents(self, document_ids: set[int]) -> None:
        """Drop the chunks of these documents (their title, or the chunks themselves, changed)."""
        stale = [c for c, d in self.document_of.items() if d in document_ids]
        for chunk_id in stale:
            self.size -= len(self.chunks.pop(chunk_id).token_ids)
            del self.document_of[chunk_id]
