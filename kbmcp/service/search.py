"""Search: the one function behind `kbmcp search` and the MCP `search_knowledge` tool.

Order of work (DESIGN.md, "scope first, then rank, then limit"):
1. validate every argument and resolve the scope (ids, readability, conflicts) - no retrieval yet;
2. embed the query (only if a vector channel runs);
3. inside one read transaction: materialise the allowed chunk ids, run each channel over them
   only, fuse, cut to the limit, and load what the results cite.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence

import apsw
import numpy as np

from kbmcp.access import READ, Principal, readable_kb_ids
from kbmcp.search.excerpt import make_excerpt
from kbmcp.search.fusion import Fused, fuse, rank_channel
from kbmcp.search.lexical import (
    LexicalHits,
    document_tokenizer,
    ensure_vocabulary,
    search_lexical,
    term_tokens,
)
from kbmcp.search.models import (
    Citation,
    SearchRequest,
    SearchResponse,
    SearchResult,
    SearchStats,
)
from kbmcp.search.query_text import query_terms
from kbmcp.search.request import SearchArguments, check_arguments
from kbmcp.search.scope import Scope, resolve_scope, scope_chunk_ids, unmatched_filters
from kbmcp.search.semantic import SemanticHits, choose_strategy, search_semantic
from kbmcp.workspace import Workspace

PUBLIC_IDS = "SELECT id, public_id FROM chunk WHERE id IN carray(:ids)"

RESULT_ROWS = """
SELECT c.id, c.public_id, d.public_id, r.public_id, kb.public_id, d.title, d.path,
       c.heading_path, c.char_start, c.char_end, c.line_start, c.line_end, c.text
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE c.id IN carray(:ids)
"""


def search(workspace: Workspace, principal: Principal, request: SearchRequest) -> SearchResponse:
    started = time.perf_counter()
    principal.require(READ)
    conn = workspace.conn
    args = check_arguments(request, workspace.settings.rrf_k)
    with workspace.lock:
        scope = resolve_scope(conn, readable_kb_ids(conn, principal), request.filters)
        if args.uses_semantic:
            workspace.ensure_model()
    # Embedding takes milliseconds of CPU: other callers may use the connection meanwhile.
    query_vector = _embed_query(workspace, args) if args.uses_semantic else None
    with workspace.lock:
        if args.uses_lexical:
            ensure_vocabulary(conn)
        with _read_transaction(conn):
            return _run(conn, args, scope, query_vector, started, workspace.long_lived)


def _embed_query(workspace: Workspace, args: SearchArguments) -> np.ndarray:
    return np.asarray(workspace.embedder.embed([args.query])[0], dtype=np.float32)


def _run(
    conn: apsw.Connection,
    args: SearchArguments,
    scope: Scope,
    query_vector: np.ndarray | None,
    started: float,
    use_caches: bool,
) -> SearchResponse:
    allowed = scope_chunk_ids(conn, scope)
    terms = query_terms(args.query)
    lexical = (
        search_lexical(conn, terms, allowed, args.depth, use_caches)
        if args.uses_lexical
        else LexicalHits([], [], [], [], False)
    )
    semantic = (
        search_semantic(conn, query_vector, allowed, args.depth, args.min_similarity, use_caches)
        if query_vector is not None
        else SemanticHits([], [], choose_strategy(allowed), False)
    )
    public_ids = _public_ids(conn, [*lexical.chunk_ids, *semantic.chunk_ids])
    fused = fuse(
        args.mode,
        rank_channel(lexical.chunk_ids, lexical.scores, public_ids),
        rank_channel(semantic.chunk_ids, semantic.similarities, public_ids),
        public_ids,
        alpha=args.alpha,
        rrf_k=args.rrf_k,
    )
    top = fused[: args.limit]
    query_tokens = {token for term in lexical.terms for token in term_tokens(conn, term)}
    results = _results(conn, top, query_tokens)
    scope_chunks = None if not scope.filtered else len(allowed)
    stats = SearchStats(
        lexical_candidates=len(lexical.chunk_ids),
        semantic_candidates=len(semantic.chunk_ids),
        scope_chunks=scope_chunks,
        results=len(results),
        has_more=len(fused) > args.limit or lexical.more or semantic.more,
        limit=args.limit,
        limit_clamped=args.limit_clamped,
        filters_unmatched=unmatched_filters(conn, scope) if scope_chunks == 0 else [],
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


def _public_ids(conn: apsw.Connection, chunk_ids: Sequence[int]) -> dict[int, str]:
    if not chunk_ids:
        return {}
    ids = np.unique(np.asarray(chunk_ids, dtype=np.int64))
    return dict(conn.execute(PUBLIC_IDS, {"ids": apsw.carray(ids)}).fetchall())


def _results(
    conn: apsw.Connection, top: Sequence[Fused], query_tokens: set[str]
) -> list[SearchResult]:
    if not top:
        return []
    ids = np.asarray([f.chunk_id for f in top], dtype=np.int64)
    rows = {row[0]: row for row in conn.execute(RESULT_ROWS, {"ids": apsw.carray(ids)})}
    tokenize = document_tokenizer(conn)
    results = []
    for item in top:
        (_, chunk_id, doc_id, rev_id, kb_id, title, path, heading, char_start, char_end,
         line_start, line_end, text) = rows[item.chunk_id]  # fmt: skip
        results.append(
            SearchResult(
                kind="document",
                chunk_id=chunk_id,
                document_id=doc_id,
                revision_id=rev_id,
                knowledge_base_id=kb_id,
                title=title,
                path=path,
                heading_path=json.loads(heading),
                excerpt=make_excerpt(text, query_tokens, tokenize),
                citation=Citation(path, rev_id, line_start, line_end, char_start, char_end),
                lexical_rank=item.lexical.rank if item.lexical else None,
                lexical_score=item.lexical.score if item.lexical else None,
                semantic_rank=item.semantic.rank if item.semantic else None,
                semantic_similarity=item.semantic.score if item.semantic else None,
                score=item.score,
            )
        )
    return results


@contextlib.contextmanager
def _read_transaction(conn: apsw.Connection) -> Iterator[None]:
    """One snapshot for the whole search (WAL: never blocks or is blocked by a writer), so the
    scope, both channels and the result rows agree even while another process commits."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")
