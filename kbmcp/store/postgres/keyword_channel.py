"""The keyword channel of a PostgreSQL search: its plan and its part of the channels statement.

`lexical_plan` decides once over every searched store (the statistics of the readable set,
hybrid's keyword scale, the stop-word pruning, the plan: plan_choice.py); `lexical_sql` writes
the channel's CTEs and body for the channels statement (channels.py) from it: FTS5's bm25 from
every posting of the kept phrases in the scope (keyword.py's CONTRIBUTION), summed in query
order, with the fallback to every term inside the statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from kbmcp.store.postgres import keyword, plan_choice
from kbmcp.store.postgres.array_literals import float8_array_literal
from kbmcp.store.postgres.keyword import CONTRIBUTION, KeywordStats, Phrase
from kbmcp.store.postgres.prelude import Prelude
from kbmcp.store.postgres.rank_request import RankRequest

NO_LEXICAL = "SELECT NULL::bigint, NULL::float8, NULL::integer WHERE false"

LEXICAL_KEPT = """lexical_kept_hit(phrase, chunk_id, length, f) AS MATERIALIZED (
{kept}
),
lexical_kept(chunk_id, score) AS MATERIALIZED (
    SELECT h.chunk_id, sum({contribution} ORDER BY h.phrase)
    FROM lexical_kept_hit AS h
    GROUP BY h.chunk_id
),
"""
# Only read when the kept terms find no more than :depth rows (the CTE is not computed when the
# branch that reads it is cut by its one-time filter). How many rows the kept terms find is
# counted once (lexical_kept_count), not in each branch's filter: two subqueries were two
# scans of lexical_kept (8,400 rows for a 10% scope of the 100k bench: ~0.5 ms).
LEXICAL_DROPPED = """lexical_dropped_hit(phrase, chunk_id, length, f) AS MATERIALIZED (
{dropped}
),
lexical_all(chunk_id, score) AS (
    SELECT h.chunk_id, sum({contribution} ORDER BY h.phrase)
    FROM (SELECT * FROM lexical_kept_hit UNION ALL SELECT * FROM lexical_dropped_hit) AS h
    GROUP BY h.chunk_id
),
lexical_kept_count(found) AS MATERIALIZED (
    SELECT count(*) FROM lexical_kept
),
"""
LEXICAL_BODY = """
    SELECT chunk_id, score, 1::integer FROM lexical_kept
    ORDER BY score DESC, chunk_id
    LIMIT %(depth)s + 1"""
LEXICAL_PRUNED_OR_ALL_BODY = """
    (SELECT chunk_id, score, 1::integer FROM lexical_kept
     WHERE (SELECT found FROM lexical_kept_count) > %(depth)s
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)
    UNION ALL
    (SELECT chunk_id, score, 1::integer FROM lexical_all
     WHERE (SELECT found FROM lexical_kept_count) <= %(depth)s
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)"""
# One store of a search over several (shards.py): both candidate lists, the kept terms' and every
# term's, and (KEPT_COUNT_ROW) how many rows the kept terms find; which list a search takes is
# decided once every store's count is known.
LEXICAL_KEPT_AND_ALL_BODY = """
    (SELECT chunk_id, score, 1::integer FROM lexical_kept
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)
    UNION ALL
    (SELECT chunk_id, score, 2::integer FROM lexical_all
     ORDER BY score DESC, chunk_id
     LIMIT %(depth)s + 1)"""

# The postings of a query's single-token phrases: (phrase number, chunk id, D, f). Two phrases
# may be the same token: each counts, as in FTS5. f is FTS5's sum of one column weight per
# instance (weights are parameters: exact for weights on the 1/1024 grid).
POSTING_F = "(p.in_title * %(w_title)s + p.in_heading * %(w_heading)s + p.in_body * %(w_body)s)"
# By token: one index-only range of chunk_term_by_impact per token (each token a constant, so
# the planner knows how many rows each has).
TOKEN_POSTINGS = """
    SELECT {number}::integer AS phrase, p.chunk_id, p.length, {f} AS f{store}
    FROM chunk_term AS p
    WHERE p.token = %({token})s AND p.knowledge_base_id = ANY(%(searched_stores)s::bigint[])"""
# In a scope: a hash join with the scope's ids and stores (prelude.py's SEARCH_SETTINGS), once
# for every token's postings. Not `= ANY(array)`: PostgreSQL would hash the array at run time,
# but estimating each such test at planning time walks the whole array (~7 ms per token for 10k
# ids).
TOKENS_IN_SCOPE = """
    SELECT h.phrase, h.chunk_id, h.length, h.f
    FROM ({postings}) AS h
    JOIN scope_chunk AS s ON s.store = h.store AND s.id = h.chunk_id"""
POSTING_STORE = ", p.knowledge_base_id AS store"
# By range: each token's postings in each run of the scope, one range of chunk_term_by_chunk_id
# (token, chunk_id) per token and run, index-only: a scope's postings without reading the
# token's others (sql/004_scope_ranges.sql). OFFSET 0 keeps the LATERAL subquery a range scan
# per (token, run). Every id of a run is a chunk of the run's store (scope.py's ScopeRuns), so
# the range names no store; the searched stores are named for Citus's routing (the note on
# ranking_statement.py's RANKING) and cost one comparison per posting.
TOKENS_IN_RANGES = """
    SELECT q.phrase, p.chunk_id, p.length, {f} AS f
    FROM unnest(%({tokens})s::text[], %({phrases})s::integer[]) AS q(token, phrase)
    CROSS JOIN scope_range AS r
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.length, p.in_title, p.in_heading, p.in_body
        FROM chunk_term AS p
        WHERE p.token = q.token AND p.chunk_id BETWEEN r.lo AND r.hi
          AND p.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
        OFFSET 0) AS p"""
# By chunk: each row's postings of the tokens, one search of the primary key (chunk_id, token)
# per row. OFFSET 0 keeps the LATERAL subquery a per-row search: flattened, the planner may
# read the tokens' whole ranges instead (it cannot tell how many rows a token has here).
TOKENS_OF_ROWS = """
    SELECT q.phrase, p.chunk_id, p.length, p.f
    FROM {rows} AS s
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.token, p.length, {f} AS f
        FROM chunk_term AS p
        WHERE p.chunk_id = s.{id} AND p.knowledge_base_id = s.store
          AND p.token = ANY(%({tokens})s::text[])
          AND p.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
        OFFSET 0) AS p
    JOIN unnest(%({tokens})s::text[], %({phrases})s::integer[]) AS q(token, phrase)
      ON q.token = p.token"""

# The bounded plan (a large unscoped search, "postings_bounded"): each kept token's best
# postings by impact in each searched store (chunk_term_by_impact, read best first) are the
# candidates; the best of them by their partial sums are scored exactly with every kept phrase
# (TOKENS_OF_ROWS over lexical_candidate).
LEXICAL_BOUNDED = """lexical_list(phrase, chunk_id, store, length, f) AS MATERIALIZED (
{lists}
),
lexical_candidate(chunk_id, store) AS MATERIALIZED (
    SELECT h.chunk_id, h.store
    FROM lexical_list AS h
    GROUP BY h.chunk_id, h.store
    ORDER BY sum({contribution} ORDER BY h.phrase) DESC, h.chunk_id
    LIMIT %(rescored)s
),
"""
TOKEN_LIST = """
    SELECT {number}::integer AS phrase, l.chunk_id, store.id, l.length, l.f
    FROM unnest(%(searched_stores)s::bigint[], %(list_sizes)s::integer[]) AS store(id, listed)
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.length, {f} AS f
        FROM chunk_term AS p
        WHERE p.token = %({token})s AND p.knowledge_base_id = store.id
        ORDER BY p.impact DESC
        LIMIT store.listed) AS l"""
# The same list when one store is searched: that store's postings alone, no LATERAL over the
# list of stores. Trap (Citus): a search over several stores runs one statement per store
# (shards.py), and Citus cannot push down a LATERAL subquery with LIMIT that reads a column of
# a table function ("cannot push down this subquery"), even over a one-element list; filtered
# on the store by equality, the statement is a router query.
TOKEN_LIST_ONE_STORE = """
    (SELECT {number}::integer AS phrase, p.chunk_id, p.knowledge_base_id, p.length, {f} AS f
     FROM chunk_term AS p
     WHERE p.token = %({token})s AND p.knowledge_base_id = %(only_store)s
     ORDER BY p.impact DESC
     LIMIT %(list_size)s)"""


@dataclass(frozen=True)
class LexicalSql:
    """The keyword channel's part of the channels statement."""

    strategy: str | None
    ctes: str = ""
    body: str = NO_LEXICAL
    params: dict[str, Any] | None = None
    ceiling: float = 0.0  # hybrid's keyword scale


def phrases_of(request: RankRequest) -> list[Phrase]:
    """The query's phrases that have index tokens, when the keyword channel runs."""
    return _phrases(request) if request.lexical else []


def _phrases(request: RankRequest) -> list[Phrase]:
    """The query's phrases that have index tokens."""
    phrases: list[Phrase] = [(term, keyword.query_tokens(term)) for term in request.terms]
    return [(term, tokens) for term, tokens in phrases if tokens]


@dataclass(frozen=True)
class LexicalPlan:
    """The keyword channel's decisions for one search, made once over every searched store:
    the statistics, hybrid's keyword scale, the kept and dropped phrases, the plan, and what
    the reads' costs are estimated from (each kept single token's rows, among `indexed_rows`)."""

    strategy: str | None
    ceiling: float = 0.0
    stats: KeywordStats | None = None  # None: the channel reads nothing
    kept: tuple[Phrase, ...] = ()
    dropped: tuple[Phrase, ...] = ()
    bounded: bool = False
    kept_rows: tuple[int, ...] = ()
    indexed_rows: int = 0
    # Each searched store's indexed chunks (store, rows), sorted: the bounded plan's lists are
    # sized by the store they are read from.
    store_rows: tuple[tuple[int, int], ...] = ()


def lexical_plan(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    phrases: Sequence[Phrase],
    first: Prelude,
    searched_rows: int,
) -> LexicalPlan:
    if not phrases:
        return LexicalPlan("postings")
    stores = sorted(set(request.readable_stores))
    stats = keyword.stats_of(conn, phrases, stores, first.totals, first.token_rows)
    # hybrid's keyword scale: the sum of the phrases' idf in query order (lexical/ceiling.py)
    ceiling = 0.0
    if request.mode == "hybrid" and stats.rows:
        for term, _ in phrases:
            ceiling += stats.idf(term)
    if stats.rows == 0:
        return LexicalPlan("postings", ceiling=ceiling)
    scoped = request.scope is not None
    unscoped = request.every_store and not scoped
    kept, dropped = keyword.prune(
        phrases, stats, None if unscoped else searched_rows, request.depth
    )
    kept_rows = [stats.containing[term] for term, tokens in kept if len(tokens) == 1]
    plan = plan_choice.choose_lexical_plan(scoped, searched_rows, kept_rows, request.depth)
    bounded = plan == "bounded"
    return LexicalPlan(
        "postings_bounded" if bounded else "postings", ceiling, stats, tuple(kept),
        tuple(dropped), bounded, tuple(kept_rows), stats.rows if scoped else searched_rows,
        tuple(sorted(first.store_rows.items())),
    )  # fmt: skip


def lexical_sql(
    plan: LexicalPlan,
    request: RankRequest,
    phrases: Sequence[Phrase],
    *,
    every_list: bool = False,
) -> LexicalSql:
    """The keyword channel's part of the channels statement for `request`'s stores and scope.
    `every_list`: both candidate lists when terms were dropped (LEXICAL_KEPT_AND_ALL_BODY), for
    a store of a search over several."""
    if plan.stats is None:
        return LexicalSql(plan.strategy, ceiling=plan.ceiling)
    sql = _PhraseSql(plan.stats, phrases)
    contribution = CONTRIBUTION.replace("%(idf)s", "(%(idf)s::float8[])")
    if plan.bounded:
        # Each store's lists grow with its own rows (one store of a million: 8,000 postings
        # a token); sized by the rows of every searched store, eight stores of 125,000 would
        # each read 8,000, eight times the candidates one store of a million gives.
        rows_of = dict(plan.store_rows)
        stores = sorted(request.searched_stores)  # the channels statement's searched_stores
        store_rows = [rows_of.get(store, 0) for store in stores]
        sizes = [plan_choice.bounded_list_size(rows) for rows in store_rows]
        per_depth = plan_choice.bounded_rescored_per_depth(sum(store_rows))
        sql.params["rescored"] = per_depth * (request.depth + 1)
        lists = sql.lists(plan.kept, stores, sizes)
        ctes = LEXICAL_BOUNDED.format(lists=lists, contribution=contribution)
        ctes += LEXICAL_KEPT.format(kept=sql.rows(plan.kept, "candidates", "kept"),
                                    contribution=contribution)  # fmt: skip
        return LexicalSql(plan.strategy, ctes, LEXICAL_BODY, sql.params, plan.ceiling)
    reads = plan_choice.choose_token_reads(
        request.scope, sum(plan.kept_rows), len(plan.kept_rows), plan.indexed_rows
    )
    ctes = LEXICAL_KEPT.format(kept=sql.rows(plan.kept, reads, "kept"), contribution=contribution)
    body = LEXICAL_BODY
    if plan.dropped:
        ctes += LEXICAL_DROPPED.format(dropped=sql.rows(plan.dropped, reads, "dropped"),
                                       contribution=contribution)  # fmt: skip
        body = LEXICAL_KEPT_AND_ALL_BODY if every_list else LEXICAL_PRUNED_OR_ALL_BODY
    return LexicalSql(plan.strategy, ctes, body, sql.params, plan.ceiling)


class _PhraseSql:
    """SQL of (phrase, chunk_id, length, f) rows for some of a query's phrases, and the
    parameters it needs (phrase numbers are 1-based: they index SQL arrays)."""

    def __init__(self, stats: KeywordStats, phrases: Sequence[Phrase]) -> None:
        self.number = {term: i + 1 for i, (term, _) in enumerate(phrases)}
        self.params: dict[str, Any] = {
            "idf": float8_array_literal([stats.idf(term) for term, _ in phrases]),
            **keyword.bm25_params(stats),
            **keyword.weight_params(),
        }

    def rows(self, selected: Sequence[Phrase], reads: str, group: str) -> str:
        """Every posting of `selected` in the rows `reads` says ("searched", "scope_ranges",
        "scope_tokens", "scope_chunks", "candidates"); multi-token phrases each by
        keyword.phrase_rows_sql."""
        parts = []
        singles = [(term, tokens[0]) for term, tokens in selected if len(tokens) == 1]
        if singles and reads in ("searched", "scope_tokens"):
            scoped = reads == "scope_tokens"
            postings = "\n    UNION ALL".join(
                self._token(term, token, with_store=scoped) for term, token in singles
            )
            parts.append(TOKENS_IN_SCOPE.format(postings=postings) if scoped else postings)
        elif singles:
            names, numbers = f"{group}_tokens", f"{group}_phrases"
            self.params[names] = [token for _, token in singles]
            self.params[numbers] = [self.number[term] for term, _ in singles]
            if reads == "scope_ranges":
                parts.append(TOKENS_IN_RANGES.format(f=POSTING_F, tokens=names, phrases=numbers))
            else:
                rows, column = (("scope_chunk", "id") if reads == "scope_chunks"
                                else ("lexical_candidate", "chunk_id"))  # fmt: skip
                parts.append(TOKENS_OF_ROWS.format(f=POSTING_F, rows=rows, id=column,
                                                   tokens=names, phrases=numbers))  # fmt: skip
        phrase_rows = {"scope_tokens": "scope", "scope_chunks": "scope",
                       "scope_ranges": "scope"}.get(reads, reads)  # fmt: skip
        for term, tokens in selected:
            if len(tokens) > 1:
                sql, token_params = keyword.phrase_rows_sql(tokens, phrase_rows, self.number[term])
                parts.append(sql)
                self.params.update(token_params)
        return "\n    UNION ALL".join(parts)

    def lists(self, selected: Sequence[Phrase], stores: Sequence[int], sizes: Sequence[int]
              ) -> str:  # fmt: skip
        """The bounded plan's candidates: each single token's best postings per searched store
        (`stores`, sorted, each list as long as its entry of `sizes`), and every row of each
        multi-token phrase."""
        parts = []
        one_store = len(set(stores)) == 1
        if one_store:
            self.params["only_store"], self.params["list_size"] = stores[0], sizes[0]
        else:
            self.params["list_sizes"] = list(sizes)
        for term, tokens in selected:
            if len(tokens) == 1:
                name = f"l{self.number[term]}"
                listed = TOKEN_LIST_ONE_STORE if one_store else TOKEN_LIST
                parts.append(listed.format(number=self.number[term], token=name, f=POSTING_F))
                self.params[name] = tokens[0]
            else:
                sql, token_params = keyword.phrase_rows_sql(
                    tokens, "searched", self.number[term], with_store=True
                )
                parts.append(sql)
                self.params.update(token_params)
        return "\n    UNION ALL".join(parts)

    def _token(self, term: str, token: str, *, with_store: bool = False) -> str:
        name = f"s{self.number[term]}"
        self.params[name] = token
        return TOKEN_POSTINGS.format(
            number=self.number[term], token=name, f=POSTING_F,
            store=POSTING_STORE if with_store else "",
        )  # fmt: skip


def keyword_stats_for(
    conn: psycopg.Connection[Any], terms: Sequence[str], stores: Sequence[int]
) -> KeywordStats:
    """The statistics a search over `stores` (readable) scores `terms` with (for tests/tools)."""
    phrases = [(term, keyword.query_tokens(term)) for term in terms]
    return keyword.keyword_stats(conn, [p for p in phrases if p[1]], stores)
