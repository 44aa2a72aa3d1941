"""The search request and response: the contract between the search engine, the CLI and MCP.

Plain dataclasses; the MCP layer mirrors them as pydantic models for its schemas. `Citation` is
shared by every reader that points into a revision (search results, fetched chunks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODES = ("hybrid", "lexical", "semantic", "rrf")
MODE_ALIASES = {"keyword": "lexical"}
DEFAULT_MODE = "hybrid"
DEFAULT_ALPHA = 0.5
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_DOCUMENT_IDS = 100


@dataclass(frozen=True)
class Citation:
    path: str
    revision_id: str
    line_start: int
    line_end: int
    char_start: int
    char_end: int


@dataclass(frozen=True)
class SearchFilters:
    """Scope: every filter applies before ranking and the limit. None means "not filtered"."""

    knowledge_base_ids: list[str] | None = None
    document_ids: list[str] | None = None
    document_paths: list[str] | None = None  # path prefixes
    tags: dict[str, str] | None = None  # every pair must match
    metadata: dict[str, Any] | None = None  # equality on document metadata keys


@dataclass(frozen=True)
class SearchRequest:
    query: str
    mode: str = DEFAULT_MODE
    alpha: float = DEFAULT_ALPHA  # lexical weight in hybrid
    rrf_k: int | None = None  # None: the configured default (KBMCP_RRF_K, 60)
    min_similarity: float | None = None  # cosine floor for vector candidates, before fusion
    limit: int = DEFAULT_LIMIT
    filters: SearchFilters = field(default_factory=SearchFilters)
    # Candidate depth per channel (None: engine default). Tests force 1 to prove scope-first.
    candidates: int | None = None


@dataclass(frozen=True)
class SearchResult:
    kind: str  # "document" (memories later)
    chunk_id: str
    document_id: str
    revision_id: str
    knowledge_base_id: str
    title: str
    path: str
    heading_path: list[str]
    excerpt: str
    citation: Citation
    lexical_rank: int | None
    lexical_score: float | None  # bm25, higher is better (sign flipped from FTS5)
    semantic_rank: int | None
    semantic_similarity: float | None  # cosine similarity
    score: float  # the fused score the results are ordered by


@dataclass(frozen=True)
class SearchStats:
    lexical_candidates: int  # candidates the keyword channel found inside the scope
    semantic_candidates: int  # candidates the vector channel kept inside the scope
    scope_chunks: int | None  # chunks inside the scope (None: unscoped)
    results: int
    has_more: bool
    limit: int
    limit_clamped: bool  # the requested limit was above MAX_LIMIT
    filters_unmatched: list[str]  # names of filters that selected nothing
    # How each channel found its candidates (search/plan.py); None when the channel did not run.
    lexical_strategy: str | None  # fts5 | postings | scan
    vector_strategy: str | None  # sql_exact | vec0_knn | matrix_exact
    elapsed_ms: float


@dataclass(frozen=True)
class SearchResponse:
    query: str
    mode: str
    alpha: float | None
    rrf_k: int | None
    results: list[SearchResult]
    stats: SearchStats
