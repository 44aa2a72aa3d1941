"""One search, once its arguments are valid and its scope resolved: plan, channels, ranking.

Runs inside the caller's read transaction (one snapshot for scope, candidates and results):
1. the scope's chunk ids (search/scope.py);
2. the plan (search/plan.py): a strategy per channel;
3. each channel's source: SQL (plain) or candidates from the accelerator (search/accelerator.py);
4. the ranking statement (search/ranking.py): rank, fuse, tie-break, limit, join;
5. excerpts around the query's terms, for the returned rows only (search/excerpt.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import apsw
import numpy as np

from kbmcp.clock import now_iso
from kbmcp.neutralise import neutralise
from kbmcp.search.accelerator import Accelerator
from kbmcp.search.excerpt import make_excerpts
from kbmcp.search.floor import SimilarityFloor, similarity_floor
from kbmcp.search.lexical.ceiling import query_ceiling
from kbmcp.search.lexical.fts import (
    TOKENIZER,
    WEIGHTS,
    document_tokenizer,
    fts_source,
    term_tokens,
)
from kbmcp.search.lexical.scan import scan_scope
from kbmcp.search.models import Citation, SearchResponse, SearchResult, SearchStats, page_of
from kbmcp.search.plan import Plan, choose_plan
from kbmcp.search.query_text import query_terms, quote_term
from kbmcp.search.ranking import ChannelSource, Ranking, bound, rank
from kbmcp.search.request import SearchArguments
from kbmcp.search.scope import Scope, filter_documents, scope_chunk_ids, unmatched_filters
from kbmcp.search.top_k import top_k
from kbmcp.search.vector.candidates import matrix_pool, unit
from kbmcp.search.vector.sql import has_vector_index, pool_source, sql_source
from kbmcp.store.catalog import RESULT_KIND


def run_search(
    conn: apsw.Connection,
    args: SearchArguments,
    scope: Scope,
    query_vector: np.ndarray | None,
    accelerator: Accelerator | None,
    started: float,
) -> SearchResponse:
    # With an accelerator, a scope's chunks are found in its memory once it is current: the
    # filters' index searches give document ids (no document row read) and the vector copy,
    # which knows every indexed chunk's document and store, gives their chunks (10k one-chunk
    # documents: ~7 ms in SQL, ~1 ms this way; whole stores: ~50 ms against ~2 ms at 100k).
    in_memory = accelerator is not None and not scope.everything
    parts = filter_documents(conn, scope) if in_memory else []
    allowed = None if in_memory else scope_chunk_ids(conn, scope)
    terms = query_terms(args.query)
    # A user-selected set of documents is never emptied by a similarity floor (search/floor.py).
    floor = similarity_floor(conn, scope, args.min_similarity)
    if accelerator is None:
        lexical, semantic = _sources(conn, args, terms, allowed, query_vector, floor, None)
    else:
        with accelerator.lock:
            current = accelerator.refresh(conn)
            if in_memory:
                allowed = (
                    accelerator.vectors(conn).ids_of_scope(
                        [(part.stores, part.documents) for part in parts]
                    )
                    if current
                    else scope_chunk_ids(conn, scope)
                )
            lexical, semantic = _sources(
                conn, args, terms, allowed, query_vector, floor,
                accelerator if current else None,
            )  # fmt: skip
    scope_rows = None if allowed is None else len(allowed)
    ranking = rank(
        conn,
        scope_ids=allowed,
        lexical=lexical,
        semantic=semantic,
        mode=args.mode,
        alpha=args.alpha,
        rrf_k=args.rrf_k,
        depth=args.depth,
        limit=args.limit,
        # Only memories decay: without a memory store in the scope there is nothing to weigh.
        half_life_days=args.recency_half_life_days if scope.memory_store_ids else 0.0,
        now=now_iso(),
    )
    query_tokens = {token for term in terms for token in term_tokens(conn, term)}
    results = _results(conn, ranking, query_tokens)
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
        filters_unmatched=unmatched_filters(conn, scope) if filtered and scope_rows == 0 else [],
        lexical_strategy=lexical.strategy,
        vector_strategy=semantic.strategy,
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


def _sources(
    conn: apsw.Connection,
    args: SearchArguments,
    terms: list[str],
    allowed: np.ndarray | None,
    query_vector: np.ndarray | None,
    floor: SimilarityFloor,
    accelerator: Accelerator | None,
) -> tuple[ChannelSource, ChannelSource]:
    """The plan, then each channel's source (candidates from the accelerator when given)."""
    plan = choose_plan(
        scope_rows=None if allowed is None else len(allowed),
        accelerated=accelerator is not None,
        lexical=args.uses_lexical,
        semantic=query_vector is not None,
        terms_in_postings=accelerator is not None
        and all(quote_term(t) in accelerator.postings.phrases for t in terms),
    )
    lexical = _lexical_source(conn, plan, terms, allowed, args.depth, accelerator)
    if args.mode == "hybrid" and plan.lexical is not None:  # hybrid's keyword scale
        phrases = [(term, tuple(term_tokens(conn, term))) for term in terms]
        known = accelerator.postings.row_counts if accelerator is not None else {}
        lexical = replace(lexical, ceiling=query_ceiling(conn, phrases, known))
    semantic = _semantic_source(conn, plan, query_vector, allowed, args.depth, floor, accelerator)
    return lexical, semantic


def _lexical_source(
    conn: apsw.Connection,
    plan: Plan,
    terms: list[str],
    allowed: np.ndarray | None,
    depth: int,
    accelerator: Accelerator | None,
) -> ChannelSource:
    if plan.lexical is None:
        return ChannelSource.off()
    scope_rows = None if allowed is None else len(allowed)
    if plan.lexical == "fts5" or accelerator is None:
        return fts_source(conn, terms, scope_rows, depth)
    tokenizer = conn.fts5_tokenizer(TOKENIZER[0], TOKENIZER[1])
    phrases = [(term, tuple(term_tokens(conn, term))) for term in terms]
    if any(not tokens for _, tokens in phrases):
        return fts_source(conn, terms, scope_rows, depth)  # FTS5 decides what such a term means
    if plan.lexical == "scan":
        assert allowed is not None
        scanned = scan_scope(
            conn, phrases, allowed, WEIGHTS, tokenizer, accelerator.tokens,
            accelerator.postings.row_counts,
        )  # fmt: skip
        if scanned is None:  # the stored text differs from what FTS5 indexed
            return fts_source(conn, terms, scope_rows, depth)
        ids, scores = scanned
    else:
        ids, scores = accelerator.postings.score(conn, [quote_term(t) for t in terms], allowed)
    best_ids, best_scores, _ = top_k(ids, scores, depth + 1)
    return bound("lexical_candidates", plan.lexical, best_ids, best_scores)


def _semantic_source(
    conn: apsw.Connection,
    plan: Plan,
    query_vector: np.ndarray | None,
    allowed: np.ndarray | None,
    depth: int,
    floor: SimilarityFloor,
    accelerator: Accelerator | None,
) -> ChannelSource:
    if plan.vector is None or query_vector is None:
        return ChannelSource.off()
    query = unit(query_vector)
    if query is None:  # a featureless query has no direction
        return ChannelSource(plan.vector)
    if accelerator is None:
        if not has_vector_index(conn):  # a read-only file that never recorded a model
            return ChannelSource(plan.vector)
        return sql_source(plan.vector, query, allowed is not None, floor, depth)
    pool = matrix_pool(accelerator.vectors(conn), query, allowed, depth + 1, floor)
    return pool_source(plan.vector, query, pool, floor)


def _results(conn: apsw.Connection, ranking: Ranking, query_tokens: set[str]) -> list[SearchResult]:
    tokenize = document_tokenizer(conn)
    excerpts = make_excerpts([row.text for row in ranking.rows], query_tokens, tokenize)
    results = []
    for row, excerpt in zip(ranking.rows, excerpts, strict=True):
        heading_path = json.loads(row.heading_path)
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
                citation=Citation(
                    row.path,
                    row.revision_id,
                    row.line_start,
                    row.line_end,
                    row.char_start,
                    row.char_end,
                    page_of(row.format, heading_path),
                    row.revision_sha256,
                ),
                lexical_rank=row.lexical_rank,
                lexical_score=row.lexical_score,
                semantic_rank=row.semantic_rank,
                semantic_similarity=row.semantic_score,
                score=row.score,
                recency_weight=row.recency_weight,
            )
        )
    return results
