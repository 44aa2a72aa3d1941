"""What the ranking statement returns, on either backend, and the fusion constant both share.

Each backend ranks in one SQL statement of the same shape (scope -> keyword candidates -> vector
candidates -> ranks with public-id ties -> normalisation and fusion -> recency decay -> ORDER BY
... LIMIT): kbmcp/store/sqlite/search/ranking.py and kbmcp/store/postgres/ranking.py. Both give
these rows, so the engine (engine.py) builds results and statistics the same way from either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# Hybrid: the share of the query's keyword ceiling below which the keyword channel's weight is
# cut in proportion (step 4 of RANKING). Measured (docs/retrieval-quality.md): a quarter leaves
# every SciFact query as it was (nDCG@10 0.7268) and the docs questions within +0.002; a half
# lifted the docs questions (+0.012 to +0.019) but cost SciFact (-0.0014).
WEAK_KEYWORD_SHARE = 0.25


class RankedRow(NamedTuple):
    """One row of the ranking statement, in its column order. A named tuple, not a frozen
    dataclass: a search builds one per result from the statement's row, and a frozen
    dataclass's field-by-field __init__ took ~2.5 us a row against ~0.3 (0.25 ms of a
    100-result search)."""

    chunk_row_id: int
    chunk_id: str
    document_id: str
    revision_id: str
    knowledge_base_id: str
    title: str
    path: str
    heading_path: str  # JSON
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    text: str
    lexical_rank: int | None
    lexical_score: float | None
    semantic_rank: int | None
    semantic_score: float | None
    score: float  # after recency decay
    format: str  # the document's format (markdown, pdf, ...)
    revision_sha256: str
    store_kind: str  # knowledge_base.kind: documents | memories
    recency_weight: float | None  # the decay factor of a memory; None: not decayed
    knowledge_base_name: str  # of the knowledge base or memory store (the reference's first part)


@dataclass(frozen=True)
class Ranking:
    rows: list[RankedRow]
    fused_count: int  # chunks with a fused score (results before the limit)
    lexical_found: int  # lexical candidates, at most depth + 1
    semantic_found: int
