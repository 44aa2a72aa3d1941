"""Tokenised chunks for the scope scan (lexical_scan.py), kept per connection while the file is
unchanged.

Why: the scan of a 100-chunk scope spent most of its ~3 ms tokenising the same ~9k tokens again
and walking them in Python; a server asked about one folder scans the same chunks query after
query. Each chunk's tokens are kept as int32 ids into a per-connection vocabulary, with the
column of each token and the chunk's per-column sizes (already checked against FTS5's docsize
when first tokenised), so a repeat scan only concatenates arrays.

Freshness: like the term cache, everything is dropped when the file changes (`PRAGMA
data_version`, this connection's `total_changes()`): a chunk's indexed text includes its
document's title, and ids of deleted rows can be reused.
Memory: ~5 bytes per cached token plus the vocabulary; above MAX_TOKENS the chunks are dropped
(the vocabulary stays, so ids a caller already holds keep their meaning).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import apsw
import numpy as np

MAX_TOKENS = 4_000_000  # ~20 MB of arrays: ~45k chunks of ~90 tokens


@dataclass(frozen=True)
class ChunkTokens:
    token_ids: np.ndarray  # int32 vocabulary ids, in text order (title, heading, body)
    columns: np.ndarray  # int8 column of each token
    sizes: np.ndarray  # int64 (3,): tokens per column, equal to FTS5's docsize record


@dataclass
class TokenCache:
    fingerprint: tuple[object, ...]
    vocabulary: dict[str, int] = field(default_factory=dict)
    chunks: dict[int, ChunkTokens] = field(default_factory=dict)
    size: int = 0  # cached tokens

    def token_ids(self, tokens: list[str]) -> np.ndarray:
        """Vocabulary ids of `tokens`, adding new ones."""
        vocabulary = self.vocabulary
        return np.fromiter(
            (vocabulary.setdefault(token, len(vocabulary)) for token in tokens),
            dtype=np.int32,
            count=len(tokens),
        )

    def add(self, chunk_id: int, chunk: ChunkTokens) -> None:
        if self.size + len(chunk.token_ids) > MAX_TOKENS:
            self.chunks.clear()
            self.size = 0
        self.chunks[chunk_id] = chunk
        self.size += len(chunk.token_ids)


_CACHES: weakref.WeakKeyDictionary[apsw.Connection, TokenCache] = weakref.WeakKeyDictionary()


def token_cache(conn: apsw.Connection) -> TokenCache:
    """The connection's cache, emptied if the file changed since it was filled."""
    fingerprint = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes())
    cached = _CACHES.get(conn)
    if cached is not None and cached.fingerprint == fingerprint:
        return cached
    fresh = TokenCache(fingerprint)
    _CACHES[conn] = fresh
    return fresh
