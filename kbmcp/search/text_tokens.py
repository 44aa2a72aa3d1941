"""Every token of the texts a long-lived process returns, kept so that an excerpt is a lookup.

An excerpt is centred on the query's tokens in the returned text (search/excerpt.py). Finding
them costs ~35-55 us a text even on the fast path (search/matches.py: folding, word edges,
anchors, stemming the candidate words): ~3-5 ms for a search that returns 100 abstracts. A
server returns the same texts again and again, so a long-lived workspace keeps, per text, the
character offset and a vocabulary code of each of its tokens; a search's matches in the texts
it keeps are then one pass over their codes (SciFact, 100 results: the excerpts ~2.7 ms instead
of ~5.5).

Admission: a text is kept the second time it is returned. Tokenising a text whole (as
`reference_matches` does, which is what makes an entry exact) costs 2-4x what the fast path
spends on it, so the first time a text is returned its matches are found as without this cache
and only a digest of it is remembered; a text returned once and never again costs nothing more.

What an entry holds is a function of the text alone, and the key is the text's length and its
hash (Python's 64-bit SipHash, keyed afresh in every process), so an entry cannot be stale: a
chunk whose text changed, a chunk deleted and its id reused, a write by another server on the
same PostgreSQL database all look up another key. The text itself is not kept: a deleted
document or a forgotten memory leaves no text in the process. Two texts of one length with one
hash (~1e-10 for a full cache over a process's life) would place one excerpt's window by the
other's tokens, still inside its own text; and as keys are per tenant, a caller who crafted
such a pair could only misplace his own excerpts. Nothing is served from the cache but offsets
into the text the search just read.

Isolation: entries (and the record of texts seen once) are kept per tenant, the caller's, so a
search's time never depends on which texts another tenant's searches returned (a tenant who
guessed another tenant's text could otherwise store it, search for it, and learn from a fast
excerpt that someone had retrieved it). The memory bound is shared: another tenant's traffic
can evict one's entries, which tells no more than the machine's load does.

Memory: at most `max_bytes` (arrays and the token vocabulary together, estimated), the least
recently used entries evicted first, and ~4 MB at most for the record of texts seen once;
SciFact's 5,183 abstracts take ~15 MB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kbmcp.search.matches import FoundMatches, QueryMatches, Tokenize, no_matches

# 32 MiB: SciFact's 5,183 abstracts whole take ~15; and it stays below the 40 MiB that
# bench/soak.py allows a server's private memory to grow after its warm-up, so a cache filling
# under a varied stream of queries is not taken for a leak.
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
# (tenant id, the text's length, hash(text)): module docstring.
Key = tuple[int, int, int]
# What a dict entry, its key and the entry's objects cost beyond the arrays' data (~400 bytes).
ENTRY_OVERHEAD_BYTES = 400
# How many texts seen once are remembered before the record starts over: one int each (the
# key's hash), ~4 MB for a full record, beside the entries' bound (measured: 50,000 random
# 63-bit ints in a set, 3.9 MB by tracemalloc).
MAX_SEEN_ONCE = 50_000
# What a vocabulary entry costs: a short token's string (~55 bytes), a dict slot, a small int.
VOCABULARY_ENTRY_BYTES = 160


@dataclass(frozen=True)
class TextTokens:
    """One text's tokens in order: each one's character offset and its vocabulary code."""

    offsets: np.ndarray  # int32
    codes: np.ndarray  # int32

    @property
    def nbytes(self) -> int:
        return self.offsets.nbytes + self.codes.nbytes


class TextTokenCache:
    """Per tenant, the tokens of recently returned texts (module docstring). Thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, TextTokens] = OrderedDict()
        self._entry_bytes = 0
        # token -> code; a missing token gets the next code (len() before the insert).
        self._vocabulary: defaultdict[str, int] = defaultdict()
        self._vocabulary.default_factory = self._vocabulary.__len__
        # hash(key) of texts returned once and not kept (yet): a collision only admits a text a
        # return early.
        self._seen: set[int] = set()
        self.tokenised = 0  # texts tokenised whole so far (tests, diagnostics)

    def of_tenant(self, tenant_id: int) -> TenantTextTokens:
        return TenantTextTokens(self, tenant_id)

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._entry_bytes + self._vocabulary_bytes

    @property
    def _vocabulary_bytes(self) -> int:
        # Tokens are short: their size by count, not each.
        return len(self._vocabulary) * VOCABULARY_ENTRY_BYTES

    def holds(self, tenant_id: int, text: str) -> bool:
        with self._lock:
            return _key(tenant_id, text) in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def found(
        self, tenant_id: int, texts: Sequence[str], query_tokens: set[str], tokenize: Tokenize
    ) -> FoundMatches:
        """`QueryMatches(query_tokens, tokenize).found(texts)`: from the tenant's entries for
        the texts it keeps, anew for the others (module docstring, "Admission")."""
        if not query_tokens or not texts:
            return no_matches()
        kept: list[int] = []
        entries: list[TextTokens] = []
        fresh: list[int] = []
        # One lock section (tokenising inside it): entries' codes and the query's codes must
        # come from one vocabulary, which an eviction may start over.
        with self._lock:
            for i, text in enumerate(texts):
                key = _key(tenant_id, text)
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                elif self._seen_before(key):
                    entry = self._keep(key, *_tokens_of(text, tokenize))
                if entry is None:
                    fresh.append(i)
                else:
                    kept.append(i)
                    entries.append(entry)
            # Before evicting: starting the vocabulary over would change the codes.
            codes = {token: self._vocabulary.get(token) for token in query_tokens}
            vocabulary_size = len(self._vocabulary)
            self._evict()
        found = _matches(entries, kept, codes, vocabulary_size)
        if fresh:  # first seen: found as a search without this cache finds them
            more = QueryMatches(query_tokens, tokenize).found([texts[i] for i in fresh])
            found = _merged(found, more, fresh)
        return found

    def _seen_before(self, key: Key) -> bool:
        """Whether the text was returned before (since the record of texts seen once last
        started over); records it if not."""
        digest = hash(key)
        if digest in self._seen:
            self._seen.discard(digest)
            return True
        if len(self._seen) >= MAX_SEEN_ONCE:
            self._seen.clear()
        self._seen.add(digest)
        return False

    def _keep(self, key: Key, offsets: np.ndarray, tokens: tuple[str, ...]) -> TextTokens:
        """Keep a text not kept yet (`found` looked it up in the same lock section)."""
        codes = np.fromiter(
            map(self._vocabulary.__getitem__, tokens), dtype=np.int32, count=len(tokens)
        )
        entry = TextTokens(offsets, codes)
        self.tokenised += 1
        self._entries[key] = entry
        self._entry_bytes += _entry_bytes(entry)
        return entry

    def _evict(self) -> None:
        if self._vocabulary_bytes > self.max_bytes // 2:
            # The codes of every entry depend on the vocabulary: start over (a process whose
            # texts hold millions of distinct tokens; entries would otherwise be the smaller part).
            self._entries.clear()
            self._vocabulary.clear()
            self._entry_bytes = 0
            return
        while self._entries and self._entry_bytes + self._vocabulary_bytes > self.max_bytes:
            _, entry = self._entries.popitem(last=False)
            self._entry_bytes -= _entry_bytes(entry)


@dataclass(frozen=True)
class TenantTextTokens:
    """The cache as one tenant's searches use it."""

    cache: TextTokenCache
    tenant_id: int

    def found(
        self, texts: Sequence[str], query_tokens: set[str], tokenize: Tokenize
    ) -> FoundMatches:
        return self.cache.found(self.tenant_id, texts, query_tokens, tokenize)


def _tokens_of(text: str, tokenize: Tokenize) -> tuple[np.ndarray, tuple[str, ...]]:
    """Every token of `text` (the index tokenizer's, as `reference_matches` finds them) and its
    character offset."""
    data = text.encode("utf-8")
    found = tokenize(data)
    if not found:
        return np.zeros(0, dtype=np.int32), ()
    # Columns by zip (C), not a comprehension per token: ~230 tokens an abstract.
    starts_bytes, _, tokens, *_ = zip(*found, strict=False)
    starts = np.array(starts_bytes, dtype=np.int32)
    if len(data) != len(text):
        # Byte offsets to character offsets: a character starts at every byte that is not a
        # UTF-8 continuation byte (10xxxxxx), and a token starts on a character.
        lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
        starts = (np.cumsum(lead, dtype=np.int32) - 1)[starts]
    return starts, tokens


def _key(tenant_id: int, text: str) -> Key:
    return (tenant_id, len(text), hash(text))


def _entry_bytes(entry: TextTokens) -> int:
    return entry.nbytes + ENTRY_OVERHEAD_BYTES


def _matches(
    entries: list[TextTokens],
    texts: list[int],
    codes: dict[str, int | None],
    vocabulary_size: int,
) -> FoundMatches:
    """The matches of the query's tokens (`codes`: each one's vocabulary code, None if no kept
    text holds it) in the kept texts `entries`, which are the batch's texts `texts`; their
    codes are below `vocabulary_size`."""
    present = sorted((code, token) for token, code in codes.items() if code is not None)
    if not entries or not present:
        return no_matches()
    all_codes = np.concatenate([entry.codes for entry in entries])
    # Each code's query token (an index into `present`), -1 for the others: one gather a token
    # (100 abstracts, ~23k tokens: ~0.9 ms with searchsorted and np.unique, ~0.2 this way).
    query_token = np.full(vocabulary_size, -1, dtype=np.int32)
    query_token[[code for code, _ in present]] = np.arange(len(present), dtype=np.int32)
    position = query_token[all_codes]
    keep = np.flatnonzero(position >= 0)
    hit = position[keep]
    # Only the tokens that occur, as the fast path lists them: the window choice loops over
    # the vocabulary, and a query token the cache knows from other texts would be a pass more.
    occurs = np.bincount(hit, minlength=len(present)) > 0
    renumbered = np.cumsum(occurs, dtype=np.int64) - 1
    text_of = np.repeat(np.asarray(texts, dtype=np.int64), [len(e.codes) for e in entries])
    offsets = np.concatenate([entry.offsets for entry in entries])
    return FoundMatches(
        text_of[keep],
        offsets[keep].astype(np.int64),
        renumbered[hit],
        [present[i][1] for i in np.flatnonzero(occurs).tolist()],
    )


def _merged(kept: FoundMatches, fresh: FoundMatches, fresh_texts: list[int]) -> FoundMatches:
    """Both sets of matches in one, ordered by text, then offset (`fresh`'s text numbers are
    indexes into `fresh_texts`)."""
    vocabulary = list(dict.fromkeys(kept.vocabulary + fresh.vocabulary))
    index = {token: i for i, token in enumerate(vocabulary)}
    fresh_tokens = np.array([index[token] for token in fresh.vocabulary], dtype=np.int64)
    texts = np.concatenate([kept.texts, np.asarray(fresh_texts, dtype=np.int64)[fresh.texts]])
    offsets = np.concatenate([kept.offsets, fresh.offsets])
    tokens = np.concatenate([kept.tokens, fresh_tokens[fresh.tokens]])
    order = np.lexsort((offsets, texts))
    return FoundMatches(texts[order], offsets[order], tokens[order], vocabulary)
