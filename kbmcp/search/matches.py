"""Where a query's tokens occur in the texts of the results, without tokenising them whole.

An excerpt (search/excerpt.py) is centred on the query's tokens as the index tokenizer sees them
(FTS5's porter over unicode61, lexical/channel.py TOKENIZER: "running" finds "runs").
`reference_matches` is the definition: tokenise the text, keep the query's tokens; for a
1,500-character abstract that hands Python ~250 (offset, token) tuples to keep ~10.
`QueryMatches` finds the same matches in all the results of a search at once, with numpy over
their bytes:

1. Fold the texts, joined, to one byte per character (so offsets do not move): ASCII letters
   and digits lower-cased, other ASCII characters spaces, non-ASCII characters NON_ASCII.
   Words are the runs between spaces.
2. Two facts of the tokenizer give each query token an anchor: an ASCII word is a maximal run of
   [0-9A-Za-z] folded to lower case, and porter rewrites only a word's end: apart from the
   suffix it removes, it changes at most the last remaining character, and only into "e"
   (conflating -> conflate, hoping -> hope), "i" (happy -> happi) or "l" (sensibility ->
   sensibl). So an ASCII word whose token is T starts with T, or with T minus its last
   character when that is e, i or l. tests/test_search_fast_paths.py checks both facts against
   the tokenizer on every word of up to four letters and on stems with chained porter suffixes.
3. Each word's first eight bytes are one integer; a word is a candidate when they start with an
   anchor (~25 of the ~250 words of an abstract, most of them a few function words). The
   candidates are stemmed by the tokenizer, words of up to eight bytes once per distinct word,
   and those whose token is a query token are the matches.
4. A word holding a non-ASCII character (rare in most text) is tokenised alone, from the
   original text: the tokenizer decides what its letters, diacritics and separators are.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# (utf-8 text) -> [(byte start, byte end, token), ...]: the index tokenizer.
Tokenize = Callable[[bytes], Sequence[tuple[int, int, str]]]
# (character offset, token) of each query token in a text, in text order.
Matches = list[tuple[int, str]]

ASCII_WORD = re.compile(r"[0-9a-z]+")
ANCHOR_TRIMMED = "eil"  # the last characters of a token that porter may have written
PREFIX_BYTES = 8  # a word's first bytes as one big-endian integer
SPACE = ord(" ")
# Folding (`QueryMatches.found`): each non-ASCII character becomes NON_ASCII through the
# "kbmcp.fold" codec error handler, then one byte table lower-cases ASCII letters and digits,
# keeps NON_ASCII, and makes every other byte a space.
NON_ASCII = 0x80
FOLD_ERRORS = "kbmcp.fold"
_FOLD_BYTES = bytes(
    code + 32 if 65 <= code <= 90
    else code if 48 <= code <= 57 or 97 <= code <= 122 or code == NON_ASCII
    else SPACE
    for code in range(256)
)  # fmt: skip
# The top n bytes of a prefix integer.
_TOP_BYTES = np.array(
    [((1 << (8 * n)) - 1) << (8 * (PREFIX_BYTES - n)) for n in range(PREFIX_BYTES + 1)],
    dtype=np.uint64,
)


def _fold_errors(error: UnicodeError) -> tuple[bytes, int]:
    """A run of non-ASCII characters -> as many NON_ASCII bytes."""
    assert isinstance(error, UnicodeEncodeError)
    return bytes([NON_ASCII]) * (error.end - error.start), error.end


codecs.register_error(FOLD_ERRORS, _fold_errors)


def reference_matches(text: str, query_tokens: set[str], tokenize: Tokenize) -> Matches:
    """The definition: tokenise the whole text, keep the query's tokens."""
    if not query_tokens:
        return []
    data = text.encode("utf-8")
    found = []
    for start, _end, token, *_ in tokenize(data):
        if token in query_tokens:
            found.append((len(data[:start].decode("utf-8", errors="ignore")), token))
    return found


def anchor(token: str) -> str:
    """What every ASCII word whose token is `token` starts with (module docstring, point 2)."""
    return token[:-1] if len(token) >= 2 and token[-1] in ANCHOR_TRIMMED else token


@dataclass(frozen=True)
class FoundMatches:
    """The matches in a batch of texts, ordered by text, then offset."""

    texts: np.ndarray  # int64: the text of each match
    offsets: np.ndarray  # int64: its character offset in that text
    tokens: np.ndarray  # int64: its token, an index into `vocabulary`
    vocabulary: list[str]  # the query tokens that occur

    def of_text(self, count: int) -> list[Matches]:
        """Per text, [(offset, token), ...] (`reference_matches`'s shape)."""
        out: list[Matches] = [[] for _ in range(count)]
        for text, offset, token in zip(
            self.texts.tolist(), self.offsets.tolist(), self.tokens.tolist(), strict=True
        ):
            out[text].append((offset, self.vocabulary[token]))
        return out


class QueryMatches:
    """`reference_matches` for the texts of one search's results (module docstring)."""

    def __init__(self, query_tokens: set[str], tokenize: Tokenize) -> None:
        self.query_tokens = query_tokens
        self.tokenize = tokenize
        self.anchors = sorted({anchor(t) for t in query_tokens if ASCII_WORD.fullmatch(t)})
        self.vocabulary: dict[str, int] = {}  # query token -> its code in FoundMatches

    def of(self, texts: Sequence[str]) -> list[Matches]:
        return self.found(texts).of_text(len(texts))

    def found(self, texts: Sequence[str]) -> FoundMatches:
        if not self.query_tokens or not texts:
            return no_matches()
        # The texts in one string, each after a space, a space at the end; folded (module
        # docstring, point 1) to one byte per character, so byte offsets are character offsets;
        # padded so that every word has PREFIX_BYTES bytes.
        text_starts = np.cumsum([1] + [len(text) + 1 for text in texts[:-1]])
        joined = " " + " ".join(texts) + " "
        folded = joined.encode("ascii", errors=FOLD_ERRORS).translate(_FOLD_BYTES)
        data = np.frombuffer(folded + b" " * PREFIX_BYTES, dtype=np.uint8)
        edges = np.flatnonzero(np.diff((data[: len(folded)] != SPACE).view(np.int8)))
        starts, ends = edges[0::2] + 1, edges[1::2] + 1  # every word, in order
        marked = _holding_non_ascii(data[: len(folded)], starts)
        parts = []
        if self.anchors:
            candidates = self._candidates(data, starts, ends) & ~marked
            parts.append(self._plain_matches(folded, data, starts[candidates], ends[candidates]))
        if marked.any():
            parts.append(self._marked_matches(joined, starts[marked], ends[marked]))
        positions = np.concatenate([p for p, _ in parts]) if parts else np.zeros(0, np.int64)
        tokens = np.concatenate([t for _, t in parts]) if parts else np.zeros(0, np.int64)
        order = np.argsort(positions, kind="stable")
        positions, tokens = positions[order], tokens[order]
        text_of = np.searchsorted(text_starts, positions, side="right") - 1
        return FoundMatches(
            text_of, positions - text_starts[text_of], tokens, list(self.vocabulary)
        )

    def _candidates(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Which words start with an anchor."""
        prefix = _prefixes(data, starts)
        hit = np.zeros(len(starts), dtype=bool)
        for text in self.anchors:
            head = text[:PREFIX_BYTES].encode("ascii")
            wanted = np.uint64(int.from_bytes(head.ljust(PREFIX_BYTES, b"\0"), "big"))
            match = (prefix & _TOP_BYTES[len(head)]) == wanted
            if len(text) > PREFIX_BYTES:  # the rest of a long anchor, word by word (few)
                tail = text[PREFIX_BYTES:].encode("ascii")
                for i in np.flatnonzero(match).tolist():
                    at = int(starts[i]) + PREFIX_BYTES
                    match[i] = data[at : at + len(tail)].tobytes() == tail
            hit |= match
        return hit

    def _plain_matches(
        self, folded: bytes, data: np.ndarray, starts: np.ndarray, ends: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(position, token code) of the candidate ASCII words whose token is a query token."""
        codes = np.full(len(starts), -1, dtype=np.int64)
        lengths = ends - starts
        short = lengths <= PREFIX_BYTES
        # A word of up to PREFIX_BYTES bytes is its prefix integer: stemmed once per distinct
        # word (most candidates are a few function words, repeated).
        keys = _prefixes(data, starts[short]) & _TOP_BYTES[lengths[short]]
        distinct, inverse = np.unique(keys, return_inverse=True)
        words = [int(k).to_bytes(PREFIX_BYTES, "big").rstrip(b"\0") for k in distinct.tolist()]
        codes[short] = np.asarray(self._codes(words), dtype=np.int64)[inverse]
        longer = np.flatnonzero(~short)
        if len(longer):
            bounds = zip(starts[longer].tolist(), ends[longer].tolist(), strict=True)
            codes[longer] = self._codes([folded[start:end] for start, end in bounds])
        keep = codes >= 0
        return starts[keep], codes[keep]

    def _codes(self, words: list[bytes]) -> list[int]:
        """The query token code of each ASCII word, -1 when its token is not a query token."""
        tokens = self.tokenize(b" ".join(words))
        if len(tokens) != len(words):
            raise AssertionError("the index tokenizer split a word of [0-9a-z]")
        return [
            self.vocabulary.setdefault(token, len(self.vocabulary))
            if token in self.query_tokens
            else -1
            for _, _, token, *_ in tokens
        ]

    def _marked_matches(
        self, joined: str, starts: np.ndarray, ends: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(position, token code) of the query tokens in the words holding a non-ASCII
        character, each word tokenised alone: as in context, where separators surround it."""
        positions: list[int] = []
        codes: list[int] = []
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            word = joined[start:end].encode("utf-8")
            for begin, _end, token, *_ in self.tokenize(word):
                if token in self.query_tokens:
                    positions.append(start + len(word[:begin].decode("utf-8", errors="ignore")))
                    codes.append(self.vocabulary.setdefault(token, len(self.vocabulary)))
        return np.asarray(positions, dtype=np.int64), np.asarray(codes, dtype=np.int64)


def _prefixes(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The PREFIX_BYTES bytes from each start as one big-endian integer (`data` is padded)."""
    view = np.ndarray(
        (len(data) - PREFIX_BYTES + 1,), dtype=">u8", buffer=data, strides=(1,)
    )  # every offset's next eight bytes, unaligned
    return view[starts].astype(np.uint64)


def _holding_non_ascii(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Which words hold a non-ASCII character."""
    marked = np.zeros(len(starts), dtype=bool)
    found = np.flatnonzero(data == NON_ASCII)
    if len(found):
        marked[np.searchsorted(starts, found, side="right") - 1] = True
    return marked


def no_matches() -> FoundMatches:
    empty = np.zeros(0, dtype=np.int64)
    return FoundMatches(empty, empty, empty, [])
