"""The `search` concern on SQLite (the contract: kbmcp/store/search.py).

FTS5 and sqlite-vec in SQL for any process, and in-memory accelerators for a long-lived one:

- `scope`: the scope's SQL (documents, chunks, id resolution), also used by listing and scan;
- `floor`: the chunks a similarity floor spares;
- `engine`: one search: plan -> channel sources -> the ranking statement;
- `plan`: one strategy per channel, chosen once per request from one threshold each;
- `ranking`: THE ranking statement: scope CTE, channel candidates, ranks, fusion, ties, limit;
- `lexical/`: the keyword channel
  - `fts`: FTS5 SQL (the plain path), the index's statistics and tokenizer, stop-word pruning;
  - `stats`: bm25's statistics over the caller's readable set (what it may read), not the file;
  - `readable_fts`: the FTS5 path re-scored with those statistics (no accelerators);
  - `ceiling`: hybrid's keyword scale from the same statistics;
  - `postings` (accelerator): per-term bm25 contributions for large scopes;
  - `scan` (accelerator): bm25 over the text of a small scope;
  - `tokens` (accelerator): tokenised chunks kept for the scan;
- `vector/`: the semantic channel
  - `sql`: sqlite-vec SQL (the plain path, and the exact re-scoring of accelerator pools);
  - `matrix` (accelerator): every indexed vector in memory, updated in place on writes;
  - `candidates` (accelerator): exact candidate pools from the matrix;
- `accelerator`: the accelerators a long-lived workspace owns, and their freshness check;
- `top_k`, `sorted_ids`: numpy helpers of the accelerated paths.

The functions below are the concern's; the modules that need numpy are imported on first use,
so that commands which never search (`kbmcp ls`) do not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import apsw

from kbmcp.store.sqlite.search.scope import (
    count_stores,
    empty_filters,
    resolve_ids,
    resolve_memory_store_ids,
    scope_chunk_ids,
)

if TYPE_CHECKING:
    import numpy as np

    from kbmcp.store.search import Ranked, RankQuery, Tokenizer

__all__ = [
    "chunks_at_paths",
    "count_stores",
    "document_tokenizer",
    "empty_filters",
    "new_accelerator",
    "prepare_keywords",
    "rank",
    "resolve_ids",
    "resolve_memory_store_ids",
    "scope_chunk_ids",
    "selected_document_chunks",
    "term_tokens",
]


def selected_document_chunks(conn: apsw.Connection, document_ids: list[int]) -> np.ndarray:
    from kbmcp.store.sqlite.search import floor

    return floor.selected_document_chunks(conn, document_ids)


def chunks_at_paths(
    conn: apsw.Connection, knowledge_base_ids: list[int], paths: list[str]
) -> np.ndarray:
    from kbmcp.store.sqlite.search import floor

    return floor.chunks_at_paths(conn, knowledge_base_ids, paths)


def prepare_keywords(conn: apsw.Connection) -> None:
    from kbmcp.store.sqlite.search.lexical import fts

    fts.ensure_vocabulary(conn)


def rank(conn: apsw.Connection, query: RankQuery, accelerator: Any | None) -> Ranked:
    from kbmcp.store.sqlite.search import engine

    return engine.rank(conn, query, accelerator)


def term_tokens(conn: apsw.Connection, term: str) -> list[str]:
    from kbmcp.store.tokenizer import query_tokens

    return list(query_tokens(term))


def document_tokenizer(conn: apsw.Connection) -> Tokenizer:
    from kbmcp.store.tokenizer import tokenize_document

    return tokenize_document


def new_accelerator() -> Any | None:
    from kbmcp.store.sqlite.search.accelerator import Accelerator

    return Accelerator()
