"""The ranking statement on SQLite: scope, both channels, fusion, ties and the limit at once.

Every query mode, on every path, runs RANKING. The channels plug in as CTE bodies
(`ChannelSource`): FTS5 `MATCH` and sqlite-vec SQL in the plain path (lexical/fts.py,
vector/sql.py), or candidates an in-memory accelerator computed, bound as JSON (`bound`).
Whatever produced them, ranks, normalisation, fusion, tie-breaks and the limit are this SQL, so
the plain and the accelerated path cannot disagree on how candidates become results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import apsw
import numpy as np

from kbmcp.search.models import MAX_LIMIT
from kbmcp.search.ranking import WEAK_KEYWORD_SHARE, RankedRow, Ranking

# The rows of a channel that is not run (e.g. the semantic channel in lexical mode).
NO_CANDIDATES = "SELECT NULL, NULL WHERE 0"
# The scope's chunk ids, and an empty scope (carray refuses an empty array).
SCOPE_IDS = "SELECT value FROM carray(:scope_ids)"
NO_SCOPE_IDS = "SELECT NULL WHERE 0"

# Candidates computed outside SQL: a JSON array of [chunk id, score] pairs. JSON, not two
# carrays joined on rowid: SQLite joins two table-valued functions with a nested loop (1000
# candidates: 28 ms), and SQLite's JSON parser reads Python's shortest float repr back to the
# same double (checked on 500k random values), so scores stay bit-for-bit.
BOUND_CANDIDATES = "SELECT value ->> 0, value ->> 1 FROM json_each(:{name})"

RANKING = """
WITH
-- 1. Scope: the chunk ids this request may see (scope.py), resolved before ranking.
--    Not read when the scope is every indexed chunk: the channels then search the whole index.
scope_chunk(id) AS MATERIALIZED (
    {scope}
),
{channel_ctes}
-- 2. Each channel's candidates inside the scope: (chunk id, score), best first, at most
--    :depth + 1 rows (the extra row only says that the channel had more).
lexical_hit(chunk_id, score) AS MATERIALIZED (
    {lexical}
),
semantic_hit(chunk_id, score) AS MATERIALIZED (
    {semantic}
),
-- 3. Rank within each channel by score, ties by public id (stable across files and paths).
channel_hit(channel, chunk_id, score, rank) AS (
    SELECT 'lexical', h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id)
    FROM lexical_hit AS h
    JOIN chunk AS c ON c.id = h.chunk_id
    UNION ALL
    SELECT 'semantic', h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id)
    FROM semantic_hit AS h
    JOIN chunk AS c ON c.id = h.chunk_id
),
-- 4. The :depth best of each channel, their scores min-max normalised over those candidates
--    for hybrid ((s - min) / (max - min); 1.0 when every candidate scores the same). The
--    keyword channel's are then scaled by its strength, so that its weak evidence stays weak:
--    min(1, best bm25 / (:weak_share * :lexical_ceiling)), the ceiling being what a chunk of
--    average length holding every query term once scores (the sum of the terms' idf,
--    lexical/ceiling.py). A lone candidate matching one common word of a question no
--    longer gets the channel's full weight; a best match of a quarter of the ceiling or more
--    keeps it. Two-argument min() is SQLite's scalar minimum, not the aggregate; no ceiling
--    (not hybrid) divides by NULL and keeps the full weight.
candidate AS (
    SELECT channel, chunk_id, score, rank,
           coalesce((score - min(score) OVER per_channel)
                    / nullif(max(score) OVER per_channel - min(score) OVER per_channel, 0.0),
                    1.0)
           * CASE channel
             WHEN 'lexical' THEN
                 min(1.0, coalesce(max(score) OVER per_channel
                                   / nullif(:weak_share * :lexical_ceiling, 0.0), 1.0))
             ELSE 1.0
             END AS normalized
    FROM channel_hit
    WHERE rank <= :depth
    WINDOW per_channel AS (PARTITION BY channel)
),
-- 5. Fusion. lexical / semantic: the channel's own score. rrf: the sum over channels of
--    1 / (rrf_k + rank). hybrid: alpha * lexical + (1 - alpha) * semantic, normalised; a chunk
--    missing from a channel gets 0 from it (it is below that channel's worst candidate).
fused AS (
    SELECT chunk_id,
           max(CASE channel WHEN 'lexical' THEN rank END) AS lexical_rank,
           max(CASE channel WHEN 'lexical' THEN score END) AS lexical_score,
           max(CASE channel WHEN 'semantic' THEN rank END) AS semantic_rank,
           max(CASE channel WHEN 'semantic' THEN score END) AS semantic_score,
           sum(CASE :mode
               WHEN 'rrf' THEN 1.0 / (:rrf_k + rank)
               WHEN 'hybrid' THEN
                   (CASE channel WHEN 'lexical' THEN :alpha ELSE 1.0 - :alpha END) * normalized
               ELSE score
               END) AS score
    FROM candidate
    GROUP BY chunk_id
),
-- 6. Recency decay, memories only, after fusion: score * 2^(-age_days / :half_life), the age
--    from the memory's updated_at (never negative); :half_life = 0 turns it off (the engine
--    passes 0 when no memory store is searched). Documents keep their fused score. Per fused
--    chunk only what the order needs is read: its public id, and its document's store kind and
--    age in the subquery, which the CASE skips (and so does not run) when :half_life is 0.
weighted AS (
    SELECT f.chunk_id, c.public_id AS chunk_public_id,
           f.lexical_rank, f.lexical_score, f.semantic_rank, f.semantic_score, f.score,
           CASE WHEN :half_life > 0 THEN (
               SELECT pow(2.0, -max(julianday(:now) - julianday(d.updated_at), 0.0) / :half_life)
               FROM revision AS r
               JOIN document AS d ON d.id = r.document_id
               JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
               WHERE r.id = c.revision_id AND kb.kind = 'memories')
           END AS recency_weight
    FROM fused AS f
    JOIN chunk AS c ON c.id = f.chunk_id
),
-- 7. Order by the decayed score, break ties by public id, limit. MATERIALIZED: the citation
--    joins below run for these rows only, never for every fused chunk. The limit is a
--    literal (an int, 1-100, checked by `rank`): with a bound parameter the statement took twice
--    as long (SciFact, 200 candidates: 0.86 -> 0.45 ms of CPU), for a new statement per limit.
ranked AS MATERIALIZED (
    SELECT chunk_id, chunk_public_id, lexical_rank, lexical_score, semantic_rank,
           semantic_score, score * coalesce(recency_weight, 1.0) AS final_score, recency_weight,
           count(*) OVER () AS fused_count
    FROM weighted
    ORDER BY final_score DESC, chunk_public_id
    LIMIT {limit}
)
-- 8. What each result cites.
SELECT k.chunk_id, k.chunk_public_id, d.public_id, r.public_id, kb.public_id,
       d.title, d.path, c.heading_path, c.char_start, c.char_end, c.line_start, c.line_end,
       c.text, k.lexical_rank, k.lexical_score, k.semantic_rank, k.semantic_score,
       k.final_score, d.kind, r.content_hash, kb.kind, k.recency_weight, k.fused_count,
       (SELECT count(*) FROM lexical_hit) AS lexical_found,
       (SELECT count(*) FROM semantic_hit) AS semantic_found,
       kb.name
FROM ranked AS k
JOIN chunk AS c ON c.id = k.chunk_id
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
ORDER BY k.final_score DESC, k.chunk_public_id
"""


@dataclass(frozen=True)
class ChannelSource:
    """How one channel's candidates enter RANKING: a CTE body yielding (chunk id, score), best
    first, at most depth + 1 rows; CTEs it needs before it; its parameters; its strategy name;
    for the keyword channel, the query's ceiling (lexical/ceiling.py), hybrid's scale."""

    strategy: str | None  # None: the channel is not run
    body: str = NO_CANDIDATES
    params: dict[str, Any] = field(default_factory=dict)
    ctes: str = ""
    ceiling: float = 0.0
    # Set when the rows are only those the results can need (a single channel, engine.py
    # `result_rows`): how many candidates the channel has, at most depth + 1, which the
    # statement would otherwise count from its rows. None: the statement counts them.
    found: int | None = None

    @classmethod
    def off(cls) -> ChannelSource:
        return cls(strategy=None)


def bound(
    name: str, strategy: str, ids: np.ndarray, scores: np.ndarray, found: int | None = None
) -> ChannelSource:
    """Candidates computed by an accelerator, bound into the statement as parameter `name`:
    `[[id, score], ...]`, built by numpy and the json module's C encoder (no Python per row)."""
    scores_list = np.asarray(scores, dtype=np.float64).tolist()
    pairs = json.dumps(list(zip(ids.tolist(), scores_list, strict=True)))
    return ChannelSource(strategy, BOUND_CANDIDATES.format(name=name), {name: pairs}, found=found)


def rank(
    conn: apsw.Connection,
    *,
    scope_ids: np.ndarray | None,
    lexical: ChannelSource,
    semantic: ChannelSource,
    mode: str,
    alpha: float,
    rrf_k: int,
    depth: int,
    limit: int,
    half_life_days: float = 0.0,
    now: str = "",
) -> Ranking:
    """Rank, fuse, decay memories by age (`half_life_days` > 0, ages taken at `now`, ISO 8601)
    and limit."""
    has_ids = scope_ids is not None and len(scope_ids) > 0
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:  # it is written into the SQL
        raise ValueError(f"limit must be an int from 1 to {MAX_LIMIT}, got {limit!r}")
    sql = RANKING.format(
        scope=SCOPE_IDS if has_ids else NO_SCOPE_IDS,
        channel_ctes=lexical.ctes + semantic.ctes,
        lexical=lexical.body,
        semantic=semantic.body,
        limit=limit,
    )
    params: dict[str, Any] = {
        "mode": mode,
        "alpha": alpha,
        "lexical_ceiling": lexical.ceiling,
        "weak_share": WEAK_KEYWORD_SHARE,
        "rrf_k": rrf_k,
        "depth": depth,
        "half_life": half_life_days,
        "now": now or None,
        **lexical.params,
        **semantic.params,
    }
    if has_ids:
        params["scope_ids"] = apsw.carray(scope_ids)
    rows = conn.execute(sql, params).fetchall()
    if not rows:
        return Ranking([], 0, 0, 0)
    lexical_found, semantic_found = rows[0][23], rows[0][24]
    return Ranking(
        rows=[RankedRow(*row[:22], row[25]) for row in rows],
        fused_count=rows[0][22],
        lexical_found=lexical_found if lexical.found is None else lexical.found,
        semantic_found=semantic_found if semantic.found is None else semantic.found,
    )
