"""Argument validation for a search request: everything that needs no database.

Runs before any retrieval, so an invalid request never costs an embedding or an FTS query.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kbmcp.errors import InvalidRequest, QueryRequired
from kbmcp.search.models import MAX_LIMIT, MODE_ALIASES, MODES, SearchRequest

# Candidates each channel contributes to fusion when the request does not say. Measured on
# SciFact (docs/retrieval-quality.md): hybrid nDCG@10 is 0.709 at depth 10, 0.721 at 50, 0.723
# at 100, 0.724 at 200-300 and 0.726 at 1000 - a plateau from 100 on, while lexical cost grows
# with depth. RRF is flat (0.705-0.713 over 10-1000).
DEFAULT_CANDIDATES = 100
MAX_CANDIDATES = 1000


@dataclass(frozen=True)
class SearchArguments:
    query: str
    mode: str  # canonical: hybrid | lexical | semantic | rrf
    alpha: float
    rrf_k: int
    min_similarity: float | None
    limit: int
    limit_clamped: bool
    depth: int  # candidates per channel

    @property
    def uses_lexical(self) -> bool:
        """A channel with zero weight in hybrid is not run: alpha=0 is exactly semantic search
        and alpha=1 exactly lexical (a zero-weight channel would only add score-0 padding)."""
        return self.mode in ("lexical", "rrf") or (self.mode == "hybrid" and self.alpha > 0)

    @property
    def uses_semantic(self) -> bool:
        return self.mode in ("semantic", "rrf") or (self.mode == "hybrid" and self.alpha < 1)


def check_arguments(request: SearchRequest, default_rrf_k: int) -> SearchArguments:
    query = _query(request.query)
    mode = _mode(request.mode)
    alpha = _number(request.alpha, "alpha", 0.0, 1.0)
    rrf_k = default_rrf_k if request.rrf_k is None else _integer(request.rrf_k, "rrf_k", 1)
    min_similarity = (
        None
        if request.min_similarity is None
        else _number(request.min_similarity, "min_similarity", -1.0, 1.0)
    )
    requested_limit = _integer(request.limit, "limit", 1)
    limit = min(requested_limit, MAX_LIMIT)
    if request.candidates is None:
        depth = max(DEFAULT_CANDIDATES, limit)
    else:
        depth = _integer(request.candidates, "candidates", 1, MAX_CANDIDATES)
    return SearchArguments(
        query=query,
        mode=mode,
        alpha=alpha,
        rrf_k=rrf_k,
        min_similarity=min_similarity,
        limit=limit,
        limit_clamped=requested_limit > MAX_LIMIT,
        depth=depth,
    )


def _query(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise QueryRequired("query must be a non-empty string", details={"argument": "query"})
    return value.strip()


def _mode(value: Any) -> str:
    mode = value.strip().lower() if isinstance(value, str) else value
    mode = MODE_ALIASES.get(mode, mode)
    if mode not in MODES:
        valid = [*MODES, *MODE_ALIASES]
        raise InvalidRequest(
            f"mode must be one of: {', '.join(valid)} (got {value!r})",
            details={"argument": "mode", "valid": valid},
        )
    return mode


def _number(value: Any, argument: str, low: float, high: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise InvalidRequest(
            f"{argument} must be a number from {low:g} to {high:g} (got {value!r})",
            details={"argument": argument},
        )
    return float(value)


def _integer(value: Any, argument: str, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise InvalidRequest(
            f"{argument} must be an integer {bounds} (got {value!r})",
            details={"argument": argument},
        )
    return value
