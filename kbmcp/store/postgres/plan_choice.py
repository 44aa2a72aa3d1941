"""Which plan a PostgreSQL search's channels take, from the sizes the first statement read.

The keyword channel: every posting of the kept phrases ("postings") or, for a large unscoped
search, each kept token's best postings as candidates ("postings_bounded"), and how the exact
plan reads the postings (by token, by scope run, by scope chunk). The vector channel: an exact
scan ("pg_exact") or the HNSW index ("pg_hnsw"). The thresholds are module attributes, read at
each call, so that a bench or a test can move them (bench/postgres_search.py, tests).
"""

from __future__ import annotations

from collections.abc import Sequence

from kbmcp.store.postgres.scope import ScopeRuns

# Unscoped searches over more indexed chunks than this use the HNSW index and the bounded
# keyword plan (as plan.py's VECTOR_EXACT_MAX_ROWS moves SQLite from exact SQL to vec0); scoped
# searches are always exact.
VECTOR_EXACT_MAX_ROWS = 20_000

# The bounded keyword plan: each kept token's best postings per searched store, and how many
# candidates (times depth + 1) are scored exactly: recall against cost, bench/search.py. Below
# BOUNDED_MIN_POSTINGS postings of the kept tokens every posting is read.
BOUNDED_LIST_SIZE = 1000
BOUNDED_RESCORED_PER_DEPTH = 4  # the floor: `bounded_rescored_per_depth`
BOUNDED_MIN_POSTINGS = 20_000
# The candidates scored exactly grow with the searched rows too, from the floor by one per
# depth per this many rows (8 at a million). Measured on the 1M bench with vectors drawn from
# the model checked against held-out chunks (docs/scale-out.md): 4 gave unscoped hybrid
# recall@10 0.925 at 82 ms p50, 8 gave 0.953 at 88-92 ms; at 100k the floor holds (8 cost
# 1.2x on hybrid and 1.4x on lexical there for 0.01-0.015 of recall).
BOUNDED_ROWS_PER_RESCORED = 125_000
# The lists grow with the rows of the store they are read from, from BOUNDED_LIST_SIZE (the
# floor) by one posting per this many rows: a fixed list is a smaller share of a larger index.
# Measured on the 1M bench with real-shaped vectors (docs/scale-out.md): lists of 1,000 gave
# unscoped hybrid recall@10 0.892, lists of 8,000 (this rule at 1M) 0.950 at 94 ms p50; at 100k
# the floor holds (lists of 8,000 cost 1.5x there, for lexical recall 0.980 -> 0.998). By each
# store's own rows, not the searched total: eight stores of 125,000 read 1,000 a token each,
# as many candidates as one store of a million gives.
BOUNDED_ROWS_PER_LISTED = 125
# A scope chunk's postings cost about as much to read as this many postings of a token (an
# index descent and a heap page per chunk, against an index-only range: bench/search.py).
CHUNK_READ_POSTINGS = 40
# A range of one token's postings in one run of a scope costs this many postings' reads on top
# of the postings it holds (an index descent and a step of the LATERAL loop).
RANGE_READ_POSTINGS = 8


def choose_lexical_plan(
    scoped: bool, searched_rows: int, kept_rows: Sequence[int], depth: int
) -> str:
    """ "postings": every posting of the kept phrases in the scope; "bounded": each kept token's
    best postings as candidates, for a large unscoped search (where the vector channel uses the
    HNSW index) whose kept tokens have more than BOUNDED_MIN_POSTINGS postings, one of them more
    than the depth (so the kept terms alone find more rows than the depth: the stop-word
    pruning never falls back to every term). `kept_rows`: each kept token's rows."""
    if (
        not scoped
        and searched_rows > VECTOR_EXACT_MAX_ROWS
        and sum(kept_rows) > BOUNDED_MIN_POSTINGS
        and max(kept_rows, default=0) > depth
    ):
        return "bounded"
    return "postings"


def bounded_list_size(store_rows: int) -> int:
    """How many of each kept token's best postings the bounded plan reads as candidates from
    a searched store of `store_rows` indexed chunks (each store's lists by its own rows)."""
    return max(BOUNDED_LIST_SIZE, store_rows // BOUNDED_ROWS_PER_LISTED)


def bounded_rescored_per_depth(searched_rows: int) -> int:
    """How many of the bounded plan's candidates, per result of depth, are scored exactly in a
    search of `searched_rows` indexed chunks (all its stores' candidates together)."""
    return max(BOUNDED_RESCORED_PER_DEPTH, searched_rows // BOUNDED_ROWS_PER_RESCORED)


def choose_token_reads(
    scope: ScopeRuns | None, postings: int, tokens: int, indexed_rows: int
) -> str:
    """How the exact plan reads the postings of the query's single-token phrases: every posting
    of each token ("searched", unscoped), or for a scope whichever reads least of each token's
    postings in each run of the scope ("scope_ranges"), each token's every posting joined to the
    scope ("scope_tokens") and each scope chunk's ("scope_chunks"). `postings`: the `tokens`
    kept tokens' rows among `indexed_rows` rows (the readable set's, which hold the scope's);
    the scope's share of them is estimated from its share of the rows."""
    if scope is None:
        return "searched"
    in_scope = postings * scope.rows / max(indexed_rows, 1)
    costs = {
        "scope_ranges": tokens * scope.runs * RANGE_READ_POSTINGS + in_scope,
        "scope_chunks": scope.rows * CHUNK_READ_POSTINGS,
        "scope_tokens": postings,
    }
    return min(costs, key=lambda reads: costs[reads])


def choose_vector_plan(scoped: bool, searched_rows: int, has_hnsw: bool) -> str:
    """ "exact": every row of the scope by `<=>`; "hnsw": the HNSW index with iterative scans,
    for an unscoped search over more than VECTOR_EXACT_MAX_ROWS chunks."""
    if not scoped and has_hnsw and searched_rows > VECTOR_EXACT_MAX_ROWS:
        return "hnsw"
    return "exact"
