"""User text -> an FTS5 MATCH expression that can never be a syntax error.

FTS5 query syntax gives meaning to `-`, `+`, `:`, `"`, `(`, `*`, `^` and the bare words AND, OR,
NOT and NEAR, so raw user text either fails (`sqlite-vec` -> "no such column: vec", `what's` ->
syntax error) or silently means something else (`AND`). Every term is therefore sent as a quoted
string: inside quotes FTS5 only tokenises, and a term that tokenises to several tokens
(`sqlite-vec`, `C++`) becomes a phrase.

Terms are split on whitespace (not on `\\w+`): on BEIR SciFact this scored best (stack-facts.md),
because `sqlite-vec` as a phrase is more precise than `sqlite OR vec`. Terms are OR-ed: strict AND
is unusable for natural-language questions.

A double-quoted part of the query (`"error budget"`) is one term, so FTS5 matches it as a phrase:
its tokens adjacent and in order within one column. It is OR-ed with the other terms like any
word. A quote without a partner (an odd one, the last) is ordinary text, as it was before
phrases existed: FTS5 never sees query syntax.
"""

from __future__ import annotations

import re

# unicode61 treats letters, numbers and private-use characters as token characters; a term with
# none of them (`(`, `--`, an emoji) tokenises to nothing and would be an empty phrase.
_HAS_TOKEN_CHAR = re.compile(r"[^\W_]", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """The query's terms in order of first appearance: each double-quoted part (a phrase, its
    whitespace collapsed) and each whitespace-separated word outside quotes. Terms without a
    token character are left out; duplicates are dropped case-insensitively (`"budget"` is the
    word budget)."""
    seen: set[str] = set()
    terms: list[str] = []
    for term in _pieces(query):
        key = term.casefold()
        if key in seen or not _HAS_TOKEN_CHAR.search(term):
            continue
        seen.add(key)
        terms.append(term)
    return terms


def _pieces(query: str) -> list[str]:
    # NUL ends an FTS5 query string early ("unterminated string"): treat it as a separator.
    parts = query.replace("\x00", " ").split('"')
    # parts[1], parts[3], ... were inside quotes. With an odd count of quotes the last part
    # has no closing quote: it is text, and keeps its quote.
    unclosed = len(parts) - 1 if len(parts) % 2 == 0 else None
    pieces: list[str] = []
    for index, part in enumerate(parts):
        if index == unclosed:
            pieces.extend(('"' + part).split())
        elif index % 2 == 1:
            pieces.append(" ".join(part.split()))
        else:
            pieces.extend(part.split())
    return pieces


def quote_term(term: str) -> str:
    """An FTS5 string literal: double quotes around, embedded quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: list[str]) -> str | None:
    """`"a" OR "b" OR ...`, or None when there is nothing to match."""
    if not terms:
        return None
    return " OR ".join(quote_term(term) for term in terms)
