"""One PostgreSQL search as the ranking statements take it (`RankRequest`) and what it returns
(`PgRanking`): the values kbmcp/store/postgres/ranking.py and shards.py pass between the
search's statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kbmcp.search.ranking import Ranking
from kbmcp.store.postgres.scope import ScopeRuns


@dataclass(frozen=True)
class RankRequest:
    """One search as the ranking needs it (built by search.py from the engine's RankQuery).

    `readable_stores`: every knowledge base and memory store the principal may read (the
    keyword statistics' rows); `searched_stores`: the stores searched (the kinds the request
    includes); `scope`: the chunk ids of a filtered scope as runs, None when the scope is every
    indexed chunk of the searched stores; `every_store`: the searched stores are every store of
    the database (fts.py's "unscoped" for the stop-word rule)."""

    terms: Sequence[str]
    query_vector: np.ndarray | None  # a unit vector, None: no vector channel
    lexical: bool  # run the keyword channel
    readable_stores: Sequence[int]
    searched_stores: Sequence[int]
    scope: ScopeRuns | None
    every_store: bool
    mode: str
    alpha: float
    rrf_k: int
    depth: int
    limit: int
    half_life_days: float = 0.0
    now: str = ""
    min_similarity: float | None = None
    floor_exempt: Sequence[int] = ()


@dataclass(frozen=True)
class PgRanking:
    ranking: Ranking
    lexical_strategy: str | None
    vector_strategy: str | None
    ceiling: float
    scope_rows: int | None = None  # a filtered scope's chunks
