"""One search, once its arguments are valid and its scope resolved, on either backend.

Runs inside the caller's read snapshot (one snapshot for the readable set, scope, candidates
and results: kbmcp/service/search.py):
1. the query's terms (query_text.py) and the similarity floor (floor.py);
2. the backend ranks (the `search` concern, kbmcp/store/search.py: SQLite's plan, channels and
   accelerators, or PostgreSQL's statement): both channels inside the scope, fusion, decay, the
   limit;
3. excerpts around the query's terms, for the returned rows only (excerpt.py), and the stats.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from kbmcp.clock import now_iso
from kbmcp.neutralise import neutralise
from kbmcp.search.excerpt import make_excerpts
from kbmcp.search.floor import similarity_floor
from kbmcp.search.models import (
    SearchResponse,
    SearchResult,
    SearchStats,
    chunk_citation,
    reference,
)
from kbmcp.search.query_text import query_terms
from kbmcp.search.ranking import Ranking
from kbmcp.search.request import SearchArguments
from kbmcp.search.resolved import Scope
from kbmcp.search.scope import unmatched_filters
from kbmcp.store.catalog import RESULT_KIND
from kbmcp.store.search import RankQuery, ReadableStores, Tokenizer

if TYPE_CHECKING:
    from kbmcp.access import Readable
    from kbmcp.search.text_tokens import TenantTextTokens
    from kbmcp.store.backend import Connection, Store


# Heading paths are JSON arrays the store wrote (no surrounding whitespace): `raw_decode` reads
# one without json.loads's wrapper and whitespace checks (~0.26 against ~1 us a result).
_HEADINGS = json.JSONDecoder()


def readable_stores(store: Store, conn: Connection, readable: Readable) -> ReadableStores:
    """The stores whose chunks the keyword statistics cover (docs/search.md, "Keyword
    statistics"). Call inside the request's read snapshot (the count and the readable set must
    come from one snapshot)."""
    store_ids = tuple(sorted(readable.all_ids))
    return ReadableStores(store_ids, store.search.count_stores(conn) == len(store_ids))


def run_search(
    store: Store,
    conn: Connection,
    args: SearchArguments,
    scope: Scope,
    readable: ReadableStores,
    query_vector: np.ndarray | None,
    accelerator: Any | None,
    started: float,
    text_tokens: TenantTextTokens | None = None,
) -> SearchResponse:
    """`readable`: the stores the principal may read (the keyword statistics' rows);
    `accelerator`: the workspace's in-memory copies, if any (`Store.search.new_accelerator`);
    `text_tokens`: a long-lived workspace's tokens of returned texts, for the caller's tenant."""
    terms = query_terms(args.query)
    # A user-selected set of documents is never emptied by a similarity floor (floor.py).
    floor = similarity_floor(store, conn, scope, args.min_similarity)
    query = RankQuery(
        args=args,
        terms=terms,
        query_vector=query_vector,
        scope=scope,
        readable=readable,
        floor=floor,
        # Only memories decay: without a memory store in the scope there is nothing to weigh.
        half_life_days=args.recency_half_life_days if scope.memory_store_ids else 0.0,
        now=now_iso(),
    )
    ranked = store.search.rank(conn, query, accelerator)
    ranking, scope_rows = ranked.ranking, ranked.scope_rows
    query_tokens = {token for term in terms for token in store.search.term_tokens(conn, term)}
    results = _results(ranking, query_tokens, store.search.document_tokenizer(conn), text_tokens)
    filtered = scope.filtered
    stats = SearchStats(
        lexical_candidates=min(ranking.lexical_found, args.depth),
        semantic_candidates=min(ranking.semantic_found, args.depth),
        scope_chunks=scope_rows if filtered else None,
        results=len(results),
        has_more=ranking.fused_count > args.limit
        or ranking.lexical_found > args.depth
        or ranking.semantic_found > args.depth,
        limit=args.limit,
        limit_clamped=args.limit_clamped,
        filters_unmatched=unmatched_filters(store, conn, scope)
        if filtered and scope_rows == 0
        else [],
        lexical_strategy=ranked.lexical_strategy,
        vector_strategy=ranked.vector_strategy,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )
    return SearchResponse(
        query=args.query,
        mode=args.mode,
        alpha=args.alpha if args.mode == "hybrid" else None,
        rrf_k=args.rrf_k if args.mode == "rrf" else None,
        results=results,
        stats=stats,
    )


def _results(
    ranking: Ranking,
    query_tokens: set[str],
    tokenize: Tokenizer,
    text_tokens: TenantTextTokens | None,
) -> list[SearchResult]:
    texts = [row.text for row in ranking.rows]
    excerpts = make_excerpts(texts, query_tokens, tokenize, kept=text_tokens)
    results = []
    for row, excerpt in zip(ranking.rows, excerpts, strict=True):
        heading_path = _HEADINGS.raw_decode(row.heading_path)[0]
        results.append(
            SearchResult(
                kind=RESULT_KIND[row.store_kind],
                chunk_id=row.chunk_id,
                document_id=row.document_id,
                revision_id=row.revision_id,
                knowledge_base_id=row.knowledge_base_id,
                title=row.title,
                path=row.path,
                heading_path=heading_path,
                excerpt=neutralise(excerpt),
                reference=reference(
                    row.knowledge_base_name,
                    row.path,
                    row.line_start,
                    row.line_end,
                    row.revision_id,
                ),
                citation=chunk_citation(row, row.format, heading_path, row.revision_sha256),
                lexical_rank=row.lexical_rank,
                lexical_score=row.lexical_score,
                semantic_rank=row.semantic_rank,
                semantic_similarity=row.semantic_score,
                score=row.score,
                recency_weight=row.recency_weight,
            )
        )
    return results
