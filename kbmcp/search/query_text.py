"""User text -> an FTS5 MATCH expression that can never be a syntax error.

FTS5 query syntax gives meaning to `-`, `+`, `:`, `"`, `(`, `*`, `^` and the bare words AND, OR,
NOT and NEAR, so raw user text either fails (`sqlite-vec` -> "no such column: vec", `what's` ->
syntax error) or silently means something else (`AND`). Every term is therefore sent as a quoted
string: inside quotes FTS5 only tokenises, and a term that tokenises to several tokens
(`sqlite-vec`, `C++`) becomes a phrase.

Terms are split on whitespace (not on `\\w+`): on BEIR SciFact this scored best (stack-facts.md),
because `sqlite-vec` as a phrase is more precise than `sqlite OR vec`. Terms are OR-ed: strict AND
is unusable for natural-language questions.
"""

from __future__ import annotations

import re

# unicode61 treats letters, numbers and private-use characters as token characters; a term with
# none of them (`(`, `--`, an emoji) tokenises to nothing and would be an empty phrase.
_HAS_TOKEN_CHAR = re.compile(r"[^\W_]", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Whitespace-separated terms that contain at least one token character, de-duplicated
    case-insensitively in order of first appearance."""
    seen: set[str] = set()
    terms: list[str] = []
    # NUL ends an FTS5 query string early ("unterminated string"): treat it as a separator.
    for term in query.replace("\x00", " ").split():
        key = term.casefold()
        if key in seen or not _HAS_TOKEN_CHAR.search(term):
            continue
        seen.add(key)
        terms.append(term)
    return terms


def quote_term(term: str) -> str:
    """An FTS5 string literal: double quotes around, embedded quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: list[str]) -> str | None:
    """`"a" OR "b" OR ...`, or None when there is nothing to match."""
    if not terms:
        return None
    return " OR ".join(quote_term(term) for term in terms)
