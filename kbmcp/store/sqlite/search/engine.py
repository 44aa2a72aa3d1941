"""One search on SQLite, once its arguments are valid and its scope resolved: plan, channels,
ranking (the `rank` of the search concern: kbmcp/store/search.py).

Runs inside the caller's read transaction (one snapshot for scope, candidates and results):
1. the scope's chunk ids (scope.py), from the accelerator's memory when it is current;
2. the plan (plan.py): a strategy per channel;
3. each channel's source: SQL (plain) or candidates from the accelerator (accelerator.py);
4. the ranking statement (ranking.py): rank, fuse, tie-break, limit, join.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import apsw
import numpy as np

from kbmcp.search.lexical import channel
from kbmcp.search.lexical.channel import WEIGHTS
from kbmcp.search.query_text import quote_term
from kbmcp.search.query_vector import unit
from kbmcp.search.request import SearchArguments
from kbmcp.search.resolved import Scope, SimilarityFloor
from kbmcp.store.search import Ranked, RankQuery, ReadableStores
from kbmcp.store.sqlite.search.accelerator import Accelerator
from kbmcp.store.sqlite.search.lexical.ceiling import query_ceiling
from kbmcp.store.sqlite.search.lexical.fts import drop_stopwords, fts_source
from kbmcp.store.sqlite.search.lexical.readable_fts import readable_fts_source
from kbmcp.store.sqlite.search.lexical.scan import Phrase, rows_containing, scan_scope
from kbmcp.store.sqlite.search.lexical.stats import ReadableRows, readable_rows
from kbmcp.store.sqlite.search.plan import Plan, choose_plan
from kbmcp.store.sqlite.search.ranking import ChannelSource, bound
from kbmcp.store.sqlite.search.ranking import rank as rank_statement
from kbmcp.store.sqlite.search.scope import filter_documents, scope_chunk_ids
from kbmcp.store.sqlite.search.sorted_ids import positions_of
from kbmcp.store.sqlite.search.top_k import best_through_ties, top_k
from kbmcp.store.sqlite.search.vector.candidates import best_pool, matrix_pool
from kbmcp.store.sqlite.search.vector.sql import has_vector_index, pool_source, sql_source
from kbmcp.store.sqlite.search.vector.vec0_scan import scan_vec0
from kbmcp.store.tokenizer import index_tokenizer, query_tokens


def rank(conn: apsw.Connection, query: RankQuery, accelerator: Accelerator | None) -> Ranked:
    """The ranking of one search (see the module docstring)."""
    args, scope = query.args, query.scope
    # With an accelerator, a scope's chunks are found in its memory once it is current: the
    # filters' index searches give document ids (no document row read) and the vector copy,
    # which knows every indexed chunk's document and store, gives their chunks (10k one-chunk
    # documents: ~7 ms in SQL, ~1 ms this way; whole stores: ~50 ms against ~2 ms at 100k).
    in_memory = accelerator is not None and not scope.everything
    parts = filter_documents(conn, scope) if in_memory else []
    allowed = None if in_memory else scope_chunk_ids(conn, scope)
    channels = _Channels(
        args, query.terms, query.query_vector, query.floor, query.readable,
        _covers(scope, query.readable), _result_rows(args, query.half_life_days),
    )  # fmt: skip
    if accelerator is None:
        lexical, semantic = _sources(conn, channels, allowed, None)
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
            lexical, semantic = _sources(conn, channels, allowed, accelerator if current else None)
    ranking = rank_statement(
        conn,
        scope_ids=allowed,
        lexical=lexical,
        semantic=semantic,
        mode=args.mode,
        alpha=args.alpha,
        rrf_k=args.rrf_k,
        depth=args.depth,
        limit=args.limit,
        half_life_days=query.half_life_days,
        now=query.now,
    )
    scope_rows = None if allowed is None else len(allowed)
    return Ranked(ranking, lexical.strategy, semantic.strategy, scope_rows)


@dataclass(frozen=True)
class _Channels:
    """What the channels of one request need besides the scope's rows."""

    args: SearchArguments
    terms: list[str]
    query_vector: np.ndarray | None
    floor: SimilarityFloor
    readable: ReadableStores
    # The scope is the caller's whole readable set (no filter, every kind it may read).
    whole: bool
    # How many of its best rows (and rows tied with the last) a single channel must hand the
    # statement (`_result_rows`); None: all of its depth + 1.
    result_rows: int | None


def _result_rows(args: SearchArguments, half_life_days: float) -> int | None:
    """In lexical or semantic mode without decay the results are the channel's best rows in the
    channel's own order, so only its best limit + 1 rows (the extra one says there are more)
    and the rows tied with the last of them can matter: the statement then joins and ranks ~11
    rows for k = 10 instead of the depth's 101 (SciFact semantic, k = 10: 0.9 -> 0.3 ms). The
    channel's count of candidates is reported as if every one had been bound (`found`), so
    stats and has_more do not change. Fusion (hybrid, rrf) normalises or ranks over every
    candidate, and decay reorders them: those keep the whole depth."""
    if args.mode not in ("lexical", "semantic") or half_life_days > 0:
        return None
    return args.limit + 1


def _covers(scope: Scope, readable: ReadableStores) -> bool:
    if scope.everything:
        return True
    stores = [*(scope.readable_kb_ids or ()), *(scope.memory_store_ids or ())]
    return not scope.filters and tuple(sorted(stores)) == readable.store_ids


def _sources(
    conn: apsw.Connection,
    channels: _Channels,
    allowed: np.ndarray | None,
    accelerator: Accelerator | None,
) -> tuple[ChannelSource, ChannelSource]:
    """The plan, then each channel's source (candidates from the accelerator when given)."""
    args, terms = channels.args, channels.terms
    # The plan depends on the caller's readable set only: its whole readable set is planned as
    # "unscoped" whether or not the file holds other stores (docs/search.md, "Keyword
    # statistics"), so no strategy name tells a caller that other tenants' data exists.
    plan = choose_plan(
        scope_rows=None if channels.whole or allowed is None else len(allowed),
        accelerated=accelerator is not None,
        lexical=args.uses_lexical,
        semantic=channels.query_vector is not None,
        terms_in_postings=accelerator is not None
        and accelerator.holds_postings(channels.readable.store_ids, [quote_term(t) for t in terms]),
    )
    readable = None
    if plan.lexical is not None:
        readable = _readable_rows(conn, channels, allowed, accelerator)
    lexical = _lexical_source(conn, plan, channels, allowed, accelerator, readable)
    if args.mode == "hybrid" and plan.lexical is not None:  # hybrid's keyword scale
        phrases = [(term, query_tokens(term)) for term in terms]
        known = accelerator.postings.row_counts if accelerator is not None else {}
        ceiling = query_ceiling(conn, phrases, known, readable)
        lexical = replace(lexical, ceiling=ceiling)
    semantic = _semantic_source(conn, plan, channels, allowed, accelerator)
    return lexical, semantic


def _lexical_source(
    conn: apsw.Connection,
    plan: Plan,
    channels: _Channels,
    allowed: np.ndarray | None,
    accelerator: Accelerator | None,
    readable: ReadableRows | None,
) -> ChannelSource:
    """`readable`: the caller's readable set, whose statistics score (None: the index's)."""
    if plan.lexical is None:
        return ChannelSource.off()
    terms, depth = channels.terms, channels.args.depth

    def plain() -> ChannelSource:
        if readable is None:
            return fts_source(conn, terms, None if allowed is None else len(allowed), depth)
        assert allowed is not None  # a caller who cannot read every store has an allow-list
        return readable_fts_source(conn, terms, allowed, readable, depth)

    if plan.lexical == "fts5" or accelerator is None:
        return plain()
    tokenizer = index_tokenizer()
    phrases = [(term, query_tokens(term)) for term in terms]
    if any(not tokens for _, tokens in phrases):
        return plain()  # FTS5 decides what such a term means
    postings = accelerator.postings
    if readable is not None:
        # n of phrases the postings hold, without walking doclists (kept with the set until
        # the index changes): the scan's idf and the stop-word rule (`_kept_terms`) read them
        for phrase in map(quote_term, terms):
            if phrase not in readable.counts:
                held = postings.count_in(phrase, readable)
                if held is not None:
                    readable.counts[phrase] = held

    def accelerated(selected: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """(ids, scores) of the allowed rows holding any of `selected`, scored by FTS5's bm25
        over those terms; None when the stored text differs from what FTS5 indexed."""
        if plan.lexical == "scan":
            assert allowed is not None
            chosen = [(term, tokens) for term, tokens in phrases if term in selected]
            return scan_scope(
                conn, chosen, allowed, WEIGHTS, tokenizer, accelerator.tokens,
                postings.row_counts, readable,
            )  # fmt: skip
        quoted = [quote_term(t) for t in selected]
        scores = postings.score(conn, quoted, allowed, readable)
        accelerator.used_postings(channels.readable.store_ids, quoted)
        return scores

    # The stop-word rule of the plain paths, so that every path sums the same terms: a common
    # term adds ~1e-6 to a score, enough to change its sixth decimal and to reorder near-ties.
    kept = _kept_terms(conn, phrases, allowed, depth, readable, postings.row_counts)
    scanned = accelerated(kept)
    if scanned is not None and len(kept) < len(terms) and len(scanned[0]) <= depth:
        scanned = accelerated(terms)  # too few rows without the common terms: every term
    if scanned is None:
        return plain()
    best_ids, best_scores, _ = top_k(*scanned, depth + 1)
    found = None
    if channels.result_rows is not None:
        found = len(best_ids)
        best_ids, best_scores = best_through_ties(best_ids, best_scores, channels.result_rows)
    return bound("lexical_candidates", plan.lexical, best_ids, best_scores, found)


def _kept_terms(
    conn: apsw.Connection,
    phrases: list[Phrase],
    allowed: np.ndarray | None,
    depth: int,
    readable: ReadableRows | None,
    known: dict[str, int],
) -> list[str]:
    """The terms a keyword search tries first: without the common ones, by channel.py's rule
    with the frequencies and conditions of the plain paths (fts.py's `fts_source` for a caller
    who reads every store, readable_fts.py otherwise). A scope no larger than the depth would
    always fall back to every term, so it keeps them all. `known`: the whole index's counts the
    accelerator holds (the n its scores use; filled here where missing, as the scan fills
    them), so a search asks fts5vocab only for terms it has not counted since the last write."""
    terms = [term for term, _ in phrases]
    scope_rows = None if allowed is None else len(allowed)
    if readable is None:
        tokens = dict(phrases)

        def count(singles: list[str]) -> dict[str, int]:
            return rows_containing(conn, [(term, tokens[term]) for term in singles], known)

        return drop_stopwords(conn, terms, scope_rows, depth, count)[0]
    # readable_fts.py's rule for a caller who reads part of the file
    if not channel.prunes(len(terms), readable.stats.rows, scope_rows, depth):
        return terms
    singles = readable.containing(conn, [term for term, found in phrases if len(found) == 1])
    return channel.common_terms(terms, dict(phrases), singles, readable.stats.rows)[0]


def _readable_rows(
    conn: apsw.Connection,
    channels: _Channels,
    allowed: np.ndarray | None,
    accelerator: Accelerator | None,
) -> ReadableRows | None:
    """The rows and statistics of the caller's readable set (lexical/stats.py); None when it
    reads every store, so that the index's own statistics apply."""
    readable = channels.readable
    if readable.every_store or not channels.terms:
        return None
    if accelerator is not None:
        return accelerator.readable_rows(conn, readable.store_ids)
    return readable_rows(conn, readable.store_ids, allowed if channels.whole else None)


def _semantic_source(
    conn: apsw.Connection,
    plan: Plan,
    channels: _Channels,
    allowed: np.ndarray | None,
    accelerator: Accelerator | None,
) -> ChannelSource:
    query_vector, depth, floor = channels.query_vector, channels.args.depth, channels.floor
    if plan.vector is None or query_vector is None:
        return ChannelSource.off()
    query = unit(query_vector)
    if query is None:  # a featureless query has no direction
        return ChannelSource(plan.vector)
    # Only the rows the results need (`_result_rows`), when the count of candidates is exact
    # without SQL: with no floor every scored row is one (with a floor, numpy's slack at the
    # floor could count a row that sqlite-vec's score then drops).
    needed = channels.result_rows if floor.value is None else None
    count = depth + 1 if needed is None else needed
    if accelerator is not None:
        pool, scored = matrix_pool(accelerator.vectors(conn), query, allowed, count, floor)
    else:
        if not has_vector_index(conn):  # a read-only file that never recorded a model
            return ChannelSource(plan.vector)
        scanned = scan_vec0(conn, query) if plan.vector == "vec0_scan" else None
        if scanned is None:  # a small scope, or not the vec0 layout scan_vec0 reads
            strategy = "vec0_knn" if plan.vector == "vec0_scan" else plan.vector
            return sql_source(strategy, query, allowed is not None, floor, depth)
        ids, scores = scanned.ids, scanned.scores
        if allowed is not None:
            inside = positions_of(allowed, ids) >= 0
            ids, scores = ids[inside], scores[inside]
        pool, scored = best_pool(ids, scores, count, floor)
    found = None if needed is None else min(scored, depth + 1)
    return pool_source(plan.vector, query, pool, floor, found)
