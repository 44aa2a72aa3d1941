"""Accelerators: in-memory copies of the indexes that make a long-lived process's searches fast.

A `Workspace` that serves many queries (the MCP server, eval, benchmarks) holds one
`Accelerator`; a one-shot process holds none and searches with SQL alone. It owns:

- `vectors` (vector/matrix.py): every indexed vector, scored exactly in memory;
- `postings` (lexical/postings.py): per query phrase, FTS5's bm25 contribution to every row;
- `tokens` (lexical/tokens.py): tokenised chunks for the scope scan (lexical/scan.py);
- readable sets (lexical/stats.py): the rows and keyword statistics of the stores a caller who
  does not read every store may read, per set of stores, until the index changes.

Freshness is one check per request, inside the request's read transaction: the last sequence
number of the file's index change log (`index_log`, appended by triggers whenever a document's
indexed chunks or title change, whichever process wrote) and the embedding-model record. When
the log moved, only the logged documents are re-read: their vectors are replaced or appended in
place, their tokenised chunks forgotten, and their new chunks' postings added for every kept
phrase (bm25 contributions are recomputed from the new index statistics, nothing is fetched
again), so a server under steady ingest stays warm. A copy that cannot be updated in place is
dropped and rebuilt on use; a new model record (`kbmcp reembed`) replaces everything.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import apsw

from kbmcp.search.lexical.channel import WEIGHTS
from kbmcp.store.sqlite.search.lexical.own_tokens import own_tokens_for
from kbmcp.store.sqlite.search.lexical.postings import PostingsIndex
from kbmcp.store.sqlite.search.lexical.stats import ReadableRows
from kbmcp.store.sqlite.search.lexical.tokens import TokenCache
from kbmcp.store.sqlite.search.vector.matrix import VectorMatrix
from kbmcp.store.tokenizer import index_tokenizer

SELECT_LOG_POSITION = "SELECT coalesce(max(seq), 0) FROM index_log"
SELECT_LOGGED_DOCUMENTS = "SELECT DISTINCT document_id FROM index_log WHERE seq > :after"
SELECT_MODEL_STAMP = "SELECT name, dimension, version, recorded_at FROM embedding_model"
READABLE_SETS = 64  # readable sets kept (one per distinct set of stores a caller reads)


class Accelerator:
    def __init__(self) -> None:
        # Held while a search refreshes the copies and takes its candidates from them: one
        # request at a time updates them, and nobody reads a half-updated copy. The ranking
        # statement runs without it.
        self.lock = threading.RLock()
        self._position: int | None = None
        self._model: tuple[object, ...] | None = None
        self._vectors: VectorMatrix | None = None
        self.postings = PostingsIndex(WEIGHTS)
        self.tokens = TokenCache()
        self._readable: OrderedDict[tuple[int, ...], ReadableRows] = OrderedDict()
        # Per set of readable stores, the phrases whose postings its requests used.
        self._used: OrderedDict[tuple[int, ...], set[str]] = OrderedDict()

    def refresh(self, conn: apsw.Connection) -> bool:
        """Bring the copies up to the file as this connection's transaction sees it. False when
        they are already newer than that snapshot (another thread's request moved them on while
        this one's transaction began earlier): the caller then searches with SQL alone, which
        answers for exactly its snapshot. Call with `lock` held."""
        position = conn.execute(SELECT_LOG_POSITION).fetchone()[0]
        model = conn.execute(SELECT_MODEL_STAMP).fetchone()
        if position == self._position and model == self._model:
            return True
        if model == self._model and self._position is not None and position < self._position:
            return False
        self._readable.clear()  # their rows and statistics change with the index
        self.postings.forget_inside()
        if self._position is None or model != self._model:
            self._vectors = None
            self.tokens = TokenCache()
            self.postings = PostingsIndex(WEIGHTS)
        else:
            documents = sorted(
                row[0] for row in conn.execute(SELECT_LOGGED_DOCUMENTS, {"after": self._position})
            )
            if self._vectors is not None and not self._vectors.update_documents(conn, documents):
                self._vectors = None
            self.tokens.forget_documents(set(documents))
            tokenize = index_tokenizer()
            if not self.postings.update_documents(conn, documents, tokenize, self.tokens):
                self.postings = PostingsIndex(WEIGHTS)
        self._position, self._model = position, model
        return True

    def vectors(self, conn: apsw.Connection) -> VectorMatrix:
        """The vector copy, built on first use (~0.35 s at 100k chunks)."""
        if self._vectors is None:
            self._vectors = VectorMatrix.load(conn)
        return self._vectors

    def readable_rows(self, conn: apsw.Connection, store_ids: tuple[int, ...]) -> ReadableRows:
        """The readable set of these stores (lexical/stats.py), kept until the index changes
        (the last READABLE_SETS used). Call with `lock` held, after `refresh`."""
        found = self._readable.get(store_ids)
        if found is None:
            chunk_ids = self.vectors(conn).ids_of_stores(store_ids)
            found = self.postings.readable_rows(conn, chunk_ids)
            found.own = own_tokens_for(found, self.tokens)
            self._readable[store_ids] = found
            while len(self._readable) > READABLE_SETS:
                self.postings.forget_inside(self._readable.popitem(last=False)[1])
        self._readable.move_to_end(store_ids)
        return found

    def holds_postings(self, store_ids: tuple[int, ...], phrases: list[str]) -> bool:
        """Whether every phrase has postings that requests of callers reading exactly these
        stores used. The plan asks this, not merely whether the postings exist: they may have
        been filled by another tenant's request, and a strategy name that changed with what
        other tenants searched for would tell a caller about it. A set that finds phrases in
        its own rows (lexical/own_tokens.py) holds them itself."""
        readable = self._readable.get(store_ids)
        if readable is not None and readable.own is not None:
            return all(phrase in readable.inside for phrase in phrases)
        used = self._used.get(store_ids, set())
        return all(phrase in used and phrase in self.postings.phrases for phrase in phrases)

    def used_postings(self, store_ids: tuple[int, ...], phrases: list[str]) -> None:
        self._used.setdefault(store_ids, set()).update(phrases)
        self._used.move_to_end(store_ids)
        while len(self._used) > READABLE_SETS:
            self._used.popitem(last=False)
