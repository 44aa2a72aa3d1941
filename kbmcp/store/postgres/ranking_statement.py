"""The ranking statement of a PostgreSQL search (RANKING): SQLite's ranking statement
(sqlite/search/ranking.py) over both channels' candidates, with PostgreSQL spellings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from kbmcp.search.ranking import WEAK_KEYWORD_SHARE, RankedRow, Ranking
from kbmcp.store.postgres.array_literals import bigint_array_literal, float8_array_literal
from kbmcp.store.postgres.rank_request import RankRequest

# Every read of a store table names the searched stores (`= ANY(%(searched_stores)s)`), besides
# the joins on the store: Citus routes a statement to one shard only when each table in it is
# filtered on the distribution column by a value (a join to another table's column is not
# enough), so a search of one store is then one router query.
#
# SQLite's RANKING with PostgreSQL spellings: least() for the scalar min, greatest() for the
# scalar max, `COLLATE "C"` wherever public ids break ties (byte order, as SQLite's BINARY,
# whatever the database's locale), float8 parameters, and julianday() as SQLite computes it
# (JULIANDAY). Each channel's candidates, already scoped, enter as parameters (exact doubles:
# psycopg writes a float as its shortest repr, which PostgreSQL reads back to the same double),
# as an accelerator's candidates enter SQLite's statement.
RANKING = """
WITH
lexical_hit(chunk_id, score) AS MATERIALIZED (
    SELECT * FROM unnest(%(lexical_ids)s::bigint[], %(lexical_scores)s::float8[])
),
semantic_hit(chunk_id, score) AS MATERIALIZED (
    SELECT * FROM unnest(%(semantic_ids)s::bigint[], %(semantic_scores)s::float8[])
),
channel_hit AS (
    SELECT 'lexical'::text AS channel, h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id COLLATE "C") AS rank
    FROM lexical_hit AS h
    JOIN chunk AS c
      ON c.id = h.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
    UNION ALL
    SELECT 'semantic'::text, h.chunk_id, h.score,
           row_number() OVER (ORDER BY h.score DESC, c.public_id COLLATE "C")
    FROM semantic_hit AS h
    JOIN chunk AS c
      ON c.id = h.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
),
candidate AS (
    SELECT channel, chunk_id, score, rank,
           coalesce((score - min(score) OVER per_channel)
                    / nullif(max(score) OVER per_channel - min(score) OVER per_channel,
                             0.0::float8),
                    1.0::float8)
           * CASE channel
             WHEN 'lexical' THEN
                 least(1.0::float8,
                       coalesce(max(score) OVER per_channel
                                / nullif(%(weak_share)s::float8 * %(lexical_ceiling)s::float8,
                                         0.0::float8),
                                1.0::float8))
             ELSE 1.0::float8
             END AS normalized
    FROM channel_hit
    WHERE rank <= %(depth)s
    WINDOW per_channel AS (PARTITION BY channel)
),
fused AS (
    SELECT chunk_id,
           max(CASE channel WHEN 'lexical' THEN rank END) AS lexical_rank,
           max(CASE channel WHEN 'lexical' THEN score END) AS lexical_score,
           max(CASE channel WHEN 'semantic' THEN rank END) AS semantic_rank,
           max(CASE channel WHEN 'semantic' THEN score END) AS semantic_score,
           sum(CASE %(mode)s::text
               WHEN 'rrf' THEN 1.0::float8 / (%(rrf_k)s + rank)
               WHEN 'hybrid' THEN
                   (CASE channel WHEN 'lexical' THEN %(alpha)s::float8
                    ELSE 1.0::float8 - %(alpha)s::float8 END) * normalized
               ELSE score
               END) AS score
    FROM candidate
    GROUP BY chunk_id
),
-- Recency decay (memories only): per fused chunk only what the order needs is read, its public
-- id and, in the subquery that the CASE skips when half_life is 0, its store kind and age.
weighted AS (
    SELECT f.chunk_id, c.public_id AS chunk_public_id,
           f.lexical_rank, f.lexical_score, f.semantic_rank, f.semantic_score, f.score,
           CASE WHEN %(half_life)s::float8 > 0 THEN (
               SELECT power(2.0::float8,
                            -greatest({julian_now} - {julian_updated}, 0.0::float8)
                            / %(half_life)s::float8)
               FROM revision AS r
               JOIN document AS d
                 ON d.knowledge_base_id = r.knowledge_base_id AND d.id = r.document_id
               JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
               WHERE r.knowledge_base_id = c.knowledge_base_id AND r.id = c.revision_id
                 AND r.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
                 AND kb.kind = 'memories')
           END AS recency_weight
    FROM fused AS f
    JOIN chunk AS c
      ON c.id = f.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
),
-- MATERIALIZED: the citation joins below run for the `limit` rows kept, not for every fused
-- chunk (~180 at depth 100), whose text and heading the sort no longer carries either.
ranked AS MATERIALIZED (
    SELECT chunk_id, chunk_public_id, lexical_rank, lexical_score, semantic_rank,
           semantic_score, score * coalesce(recency_weight, 1.0::float8) AS final_score,
           recency_weight, count(*) OVER () AS fused_count
    FROM weighted
    ORDER BY final_score DESC, chunk_public_id COLLATE "C"
    LIMIT %(limit)s
)
SELECT k.chunk_id, k.chunk_public_id, d.public_id, r.public_id, kb.public_id,
       d.title, d.path, c.heading_path, c.char_start, c.char_end, c.line_start, c.line_end,
       c.text, k.lexical_rank, k.lexical_score, k.semantic_rank, k.semantic_score,
       k.final_score, d.kind, r.content_hash, kb.kind, k.recency_weight, k.fused_count,
       (SELECT count(*) FROM lexical_hit) AS lexical_found,
       (SELECT count(*) FROM semantic_hit) AS semantic_found,
       kb.name
FROM ranked AS k
JOIN chunk AS c
  ON c.id = k.chunk_id AND c.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
JOIN revision AS r ON r.knowledge_base_id = c.knowledge_base_id AND r.id = c.revision_id
JOIN document AS d ON d.knowledge_base_id = r.knowledge_base_id AND d.id = r.document_id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE r.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
  AND d.knowledge_base_id = ANY(%(searched_stores)s::bigint[])
ORDER BY k.final_score DESC, k.chunk_public_id COLLATE "C"
"""
# SQLite's julianday(): the time in whole milliseconds (rounded) since the Julian epoch, divided
# by the milliseconds of a day; the Unix epoch is Julian day 2440587.5.
JULIANDAY = """((round(extract(epoch FROM ({value})::timestamptz) * 1000)::bigint
                 + 210866760000000)::float8 / 86400000.0::float8)"""


def rank_candidates(
    conn: psycopg.Connection[Any],
    request: RankRequest,
    ceiling: float,
    lexical: tuple[Sequence[int], Sequence[float]],
    semantic: tuple[Sequence[int], Sequence[float]],
) -> Ranking:
    """The ranking statement (RANKING) over both channels' candidates (ids, scores)."""
    sql = RANKING.format(
        julian_now=JULIANDAY.format(value="%(now)s::text"),
        julian_updated=JULIANDAY.format(value="d.updated_at"),
    )
    rows = conn.execute(
        sql,
        {
            "mode": request.mode,
            "alpha": request.alpha,
            "lexical_ceiling": ceiling,
            "weak_share": WEAK_KEYWORD_SHARE,
            "rrf_k": request.rrf_k,
            "depth": request.depth,
            "limit": request.limit,
            "half_life": request.half_life_days,
            "now": request.now or None,
            "lexical_ids": bigint_array_literal(lexical[0]),
            "lexical_scores": float8_array_literal(lexical[1]),
            "semantic_ids": bigint_array_literal(semantic[0]),
            "semantic_scores": float8_array_literal(semantic[1]),
            "searched_stores": sorted(request.searched_stores),
        },
    ).fetchall()
    if not rows:
        return Ranking([], 0, 0, 0)
    return Ranking(
        rows=[RankedRow(*row[:22], row[25]) for row in rows],
        fused_count=rows[0][22],
        lexical_found=rows[0][23],
        semantic_found=rows[0][24],
    )
