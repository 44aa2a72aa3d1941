"""Where a query's tokens occur in the texts of the results, without tokenising them whole.

An excerpt (search/excerpt.py) is centred on the query's tokens as the index tokenizer sees them
(FTS5's porter over unicode61, lexical/fts.py TOKENIZER: "running" finds "runs"). Tokenising a
1,500-character abstract hands Python ~250 (offset, token) tuples to keep ~10; `reference_matches`
does that, and is the definition. `QueryMatches` finds the same matches from a cheaper scan:

1. Fold the text for a scan: ASCII letters and digits lower-cased, every other ASCII character a
   space, and each non-ASCII character either a space (the tokenizer separates words at it) or
   WORD_MARK (it belongs to a word: a letter, a digit, a diacritic). One character stays one
   character, so offsets do not move.
2. Two facts of the tokenizer make an anchor per query token: an ASCII word is a maximal run of
   [0-9A-Za-z] folded to lower case, and porter rewrites only a word's end: apart from the
   suffix it removes, it changes at most the last remaining character, and only into "e"
   (conflating -> conflate, hoping -> hope), "i" (happy -> happi) or "l" (sensibility ->
   sensibl). So an ASCII word whose token is T starts with T, or with T minus its last
   character when that is e, i or l. tests/test_search_fast_paths.py checks both facts against
   the tokenizer on every word of up to four letters and on stems with chains of porter's
   suffixes.
3. A regular expression finds the ASCII words that start with an anchor (~25 of ~250 in an
   abstract, mostly function words); words holding WORD_MARK are all candidates. The distinct
   candidate words of every text are stemmed in one tokenizer call; those whose token is a
   query token are the matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# (utf-8 text) -> [(byte start, byte end, token), ...]: the index tokenizer.
Tokenize = Callable[[bytes], Sequence[tuple[int, int, str]]]
# (character offset, token) of each query token in a text, in text order.
Matches = list[tuple[int, str]]

# Marks, in a folded text, a non-ASCII character that belongs to a word. An ASCII control
# character: the tokenizer separates words at it, so an original one is folded to a space.
WORD_MARK = "\x01"
ASCII_WORD = re.compile(r"[0-9a-z]+")
ANCHOR_TRIMMED = "eil"  # the last characters of a token that porter may have written

_FOLD_ASCII = str.maketrans(
    {
        chr(code): chr(code).lower() if chr(code).isalnum() else " "
        for code in range(128)
        if chr(code) != WORD_MARK
    }
)
_NOT_ASCII_OR_MARK = re.compile(f"[^\x00-\x7f]|{WORD_MARK}")
# Non-ASCII character -> WORD_MARK or " ", as the tokenizer treats it (asked once per character).
_FOLDED: dict[str, str] = {}
_FOLDED_MAX = 100_000


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


class QueryMatches:
    """`reference_matches` for the texts of one search's results (module docstring)."""

    def __init__(self, query_tokens: set[str], tokenize: Tokenize) -> None:
        self.query_tokens = query_tokens
        self.tokenize = tokenize
        anchors = sorted(
            {anchor(t) for t in query_tokens if ASCII_WORD.fullmatch(t)}, key=len, reverse=True
        )
        # " " + anchor + the rest of the word, up to the space that ends it (a word holding
        # WORD_MARK does not end at a space and is not matched here). Folded texts are padded
        # with a space on both sides.
        self.pattern = (
            re.compile(" ((?:" + "|".join(anchors) + ")[0-9a-z]*)(?= )") if anchors else None
        )

    def of(self, texts: Sequence[str]) -> list[Matches]:
        if not self.query_tokens:
            return [[] for _ in texts]
        scans = [self._scan(text) for text in texts]
        words = sorted({word for ascii_words, _ in scans for _, word in ascii_words})
        tokens = self.tokenize(" ".join(words).encode("ascii"))
        if len(tokens) != len(words):  # not one token per word: not the tokenizer described
            return [reference_matches(text, self.query_tokens, self.tokenize) for text in texts]
        token_of = {word: token[2] for word, token in zip(words, tokens, strict=True)}
        found = []
        for ascii_words, other_tokens in scans:
            matches = [(offset, token_of[word]) for offset, word in ascii_words]
            if other_tokens:
                matches = sorted(matches + other_tokens)
            found.append([(offset, t) for offset, t in matches if t in self.query_tokens])
        return found

    def _scan(self, text: str) -> tuple[list[tuple[int, str]], Matches]:
        """(offset, folded word) of each ASCII word that starts with an anchor, and (offset,
        token) of each token of the words that hold a non-ASCII character."""
        plain = text
        if not text.isascii() or WORD_MARK in text:
            plain = _NOT_ASCII_OR_MARK.sub(self._fold_character, text)
        folded = " " + plain.translate(_FOLD_ASCII) + " "
        ascii_words = []
        if self.pattern is not None:
            ascii_words = [(m.start(), m.group(1)) for m in self.pattern.finditer(folded)]
        other_tokens: Matches = []
        mark = folded.find(WORD_MARK)
        while mark >= 0:
            start = folded.rfind(" ", 0, mark) + 1
            end = folded.find(" ", mark)
            other_tokens.extend(self._tokens(text, start - 1, end - 1))  # folded is padded
            mark = folded.find(WORD_MARK, end)
        return ascii_words, other_tokens

    def _tokens(self, text: str, start: int, end: int) -> Matches:
        """(offset, token) of each token of text[start:end], one word tokenised alone: as in
        context, since a separator precedes and follows it there."""
        data = text[start:end].encode("utf-8")
        return [
            (start + len(data[:begin].decode("utf-8", errors="ignore")), token)
            for begin, _end, token, *_ in self.tokenize(data)
        ]

    def _fold_character(self, match: re.Match[str]) -> str:
        """WORD_MARK for a non-ASCII character the tokenizer keeps in a word ("a" + it + "a" is
        one token: a letter, digit or diacritic), else a space."""
        character = match.group()
        folded = _FOLDED.get(character)
        if folded is None:
            if character == WORD_MARK:
                return " "
            one_token = len(self.tokenize(f"a{character}a".encode())) == 1
            folded = WORD_MARK if one_token else " "
            if len(_FOLDED) >= _FOLDED_MAX:
                _FOLDED.clear()
            _FOLDED[character] = folded
        return folded
