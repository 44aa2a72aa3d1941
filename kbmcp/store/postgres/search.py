"""The `search` concern on PostgreSQL (the contract: kbmcp/store/search.py).

- scope: scope.py, SQLite's scope statements with PostgreSQL's spellings. A filtered scope's
  chunk ids are read once, inside the request's snapshot, as runs of consecutive ids, and enter
  both channels' statements as two arrays (each run's first and last id), read as index ranges
  (an unfiltered scope is the searched stores, read from each index by store);
- ranking: ranking.py's `rank` (one module per statement: prelude.py, channels.py,
  keyword_channel.py, vector_channel.py, ranking_statement.py), SQLite's ranking statement
  step for step, with FTS5's bm25 from this backend's postings (keyword.py) and sqlite-vec's
  similarities of pgvector's nearest rows: the same scores as SQLite, and no in-memory
  copies, so every server on the database answers from what is committed;
- the index's tokenizer is FTS5's own (keyword.py tokenises with it in Python), so excerpts
  and query tokens are SQLite's.

Strategies in a response's stats are this backend's: `postings` (or `postings_bounded`) for
keywords and `pg_exact` / `pg_hnsw` for vectors (docs/search.md).
"""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.search.query_vector import unit
from kbmcp.search.resolved import Scope
from kbmcp.store.postgres import keyword, ranking, shards
from kbmcp.store.postgres.rank_request import RankRequest
from kbmcp.store.postgres.scope import (
    chunks_at_paths,
    count_stores,
    empty_filters,
    resolve_ids,
    resolve_memory_store_ids,
    scope_chunk_ids,
    scope_query,
    selected_document_chunks,
)
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

PgConnection = psycopg.Connection[Any]
# The vector strategy of a query without a direction (its embedding is all zeros): the
# channel ran and found nothing, as SQLite reports it.
NO_DIRECTION = "pg_exact"


def prepare_keywords(conn: PgConnection) -> None:
    """Nothing to prepare: the keyword tables are the schema's."""


def rank(conn: PgConnection, query: RankQuery, accelerator: Any | None) -> Ranked:
    """The ranking of one search, inside the caller's read snapshot. `accelerator` is always
    None here (`new_accelerator`)."""
    args, scope = query.args, query.scope
    vector = None if query.query_vector is None else unit(query.query_vector)
    exempt = query.floor.exempt
    request = RankRequest(
        terms=query.terms,
        query_vector=vector,
        lexical=args.uses_lexical,
        readable_stores=query.readable.store_ids,
        searched_stores=[*_searched_knowledge_bases(scope), *(scope.memory_store_ids or ())],
        scope=None,
        every_store=scope.everything,
        mode=args.mode,
        alpha=args.alpha,
        rrf_k=args.rrf_k,
        depth=args.depth,
        limit=args.limit,
        half_life_days=query.half_life_days,
        now=query.now,
        min_similarity=query.floor.value,
        floor_exempt=[] if exempt is None else exempt.tolist(),
    )
    if shards.store_by_store(conn, request):  # on Citus, over several stores
        ranked = shards.rank(conn, request, scope if scope.filtered else None)
    else:
        ranked = ranking.rank(conn, request, scope_query(scope) if scope.filtered else None)
    vector_strategy = ranked.vector_strategy
    if query.query_vector is not None and vector is None:
        vector_strategy = NO_DIRECTION
    return Ranked(ranked.ranking, ranked.lexical_strategy, vector_strategy, ranked.scope_rows)


def _searched_knowledge_bases(scope: Scope) -> list[int]:
    """The knowledge bases a search reads: the readable ones, or with a knowledge_base_ids
    filter only those it names (no other can hold a chunk of the scope). The statements then
    name fewer stores: on Citus a search of one named knowledge base is a router query on its
    shard instead of a scope read store by store over every readable one."""
    readable = list(scope.readable_kb_ids or ())
    named = scope.filters.get("knowledge_base_ids")
    if named is None:
        return readable
    chosen = set(named)
    return [kb for kb in readable if kb in chosen]


def term_tokens(conn: PgConnection, term: str) -> list[str]:
    return list(keyword.query_tokens(term))


def document_tokenizer(conn: PgConnection) -> Tokenizer:
    return keyword.tokenize_document


def new_accelerator() -> Any | None:
    """None: a PostgreSQL database may be written by several servers at once, and an in-memory
    copy could serve what another has changed or revoked."""
    return None
