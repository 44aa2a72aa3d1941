"""The index's tokenizer (FTS5's porter over unicode61, search/lexical/channel.py TOKENIZER),
for either backend: one per thread, on a private in-memory apsw connection.

FTS5's built-in tokenizers are the same code on every connection, so a private one tokenizes
exactly as the file's `chunk_fts` does, and PostgreSQL's keyword index (which stores FTS5's
tokens) uses it too. Why private and per thread: creating a tokenizer costs ~3 us and a hybrid
search needed ~25 (each term's tokens for the keyword source, the ceiling and the excerpts);
a tokenizer keeps its connection alive, so caching one per caller's connection would keep
closed connections alive; and one per thread needs no lock.
"""

from __future__ import annotations

import threading

import apsw

from kbmcp.search.lexical.channel import TOKENIZER

# (UTF-8 text) -> [(byte start, byte end, token, ...), ...]
Tokens = list[tuple[int, int, str]]


class _Tokenizers(threading.local):
    def __init__(self) -> None:
        self.conn = apsw.Connection(":memory:")
        self.tokenize = self.conn.fts5_tokenizer(TOKENIZER[0], TOKENIZER[1])


_local = _Tokenizers()


def tokenize_document(data: bytes) -> Tokens:
    """FTS5's tokens of a document's UTF-8 text: (byte start, byte end, token) per token."""
    return _local.tokenize(data, apsw.FTS5_TOKENIZE_DOCUMENT, None)


def query_tokens(term: str) -> tuple[str, ...]:
    """The index tokens of one query term (stemmed, case- and diacritic-folded)."""
    found = _local.tokenize(term.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)
    return tuple(token for _, _, token, *_ in found)


def index_tokenizer() -> apsw.FTS5Tokenizer:
    """This thread's tokenizer object (for code that passes its own tokenize reason)."""
    return _local.tokenize
