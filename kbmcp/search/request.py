"""Argument validation for a search request: everything that needs no database.

Runs before any retrieval, so an invalid request never costs an embedding or an FTS query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbmcp.config import MAX_RRF_K
from kbmcp.errors import InvalidRequest, QueryRequired
from kbmcp.search.models import (
    DEFAULT_ALPHA,
    DEFAULT_LIMIT_CHARS,
    DEFAULT_MODE,
    FUSION_PARAMETERS,
    MAX_HALF_LIFE,
    MAX_LIMIT,
    MAX_LIMIT_CHARS,
    MAX_QUERY_CHARS,
    MODE_ALIASES,
    MODES,
    SearchRequest,
)
from kbmcp.validate import integer, number, shown

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
    recency_half_life_days: float  # 0: memories are not decayed
    include_content: bool = False
    content_limit_chars: int = DEFAULT_LIMIT_CHARS

    @property
    def uses_lexical(self) -> bool:
        """A channel with zero weight in hybrid is not run: alpha=0 is exactly semantic search
        and alpha=1 exactly lexical (a zero-weight channel would only add score-0 padding)."""
        return self.mode in ("lexical", "rrf") or (self.mode == "hybrid" and self.alpha > 0)

    @property
    def uses_semantic(self) -> bool:
        return self.mode in ("semantic", "rrf") or (self.mode == "hybrid" and self.alpha < 1)


def check_arguments(
    request: SearchRequest, default_rrf_k: int, default_half_life_days: float = 0.0
) -> SearchArguments:
    query = _query(request.query)
    mode = _fusion_mode(request)
    alpha = DEFAULT_ALPHA if request.alpha is None else number(request.alpha, "alpha", 0.0, 1.0)
    rrf_k = (
        default_rrf_k if request.rrf_k is None else integer(request.rrf_k, "rrf_k", 1, MAX_RRF_K)
    )
    min_similarity = (
        None
        if request.min_similarity is None
        else number(request.min_similarity, "min_similarity", -1.0, 1.0)
    )
    requested_limit = integer(request.limit, "limit", 1)
    limit = min(requested_limit, MAX_LIMIT)
    if request.candidates is None:
        depth = max(DEFAULT_CANDIDATES, limit)
    else:
        depth = integer(request.candidates, "candidates", 1, MAX_CANDIDATES)
    half_life = (
        default_half_life_days
        if request.recency_half_life_days is None
        else number(request.recency_half_life_days, "recency_half_life_days", 0.0, MAX_HALF_LIFE)
    )
    include_content, content_limit_chars = _content(request)
    return SearchArguments(
        query=query,
        mode=mode,
        alpha=alpha,
        rrf_k=rrf_k,
        min_similarity=min_similarity,
        limit=limit,
        limit_clamped=requested_limit > MAX_LIMIT,
        depth=depth,
        recency_half_life_days=half_life,
        include_content=include_content,
        content_limit_chars=content_limit_chars,
    )


def _content(request: SearchRequest) -> tuple[bool, int]:
    """include_content and the window it inlines (limit_chars means nothing without it)."""
    include = request.include_content
    if include is not None and not isinstance(include, bool):
        raise InvalidRequest(
            f"include_content must be true or false (got {shown(include)})",
            details={"argument": "include_content"},
        )
    if request.content_limit_chars is None:
        return bool(include), DEFAULT_LIMIT_CHARS
    if not include:
        raise InvalidRequest(
            "limit_chars: in query mode it sizes the text include_content inlines; pass "
            "include_content: true as well (or read a document with document_id)",
            details={"argument": "limit_chars", "arguments": ["limit_chars", "include_content"]},
        )
    return True, integer(request.content_limit_chars, "limit_chars", 1, MAX_LIMIT_CHARS)


def _query(value: Any) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise QueryRequired("query must not be empty", details={"argument": "query"})
    if not isinstance(value, str):
        raise InvalidRequest(
            f"query must be a string (got {shown(value)})", details={"argument": "query"}
        )
    if len(value) > MAX_QUERY_CHARS:
        # Refused before any work, and not echoed: a 10 MB query held a server for 20-40 s.
        raise InvalidRequest(
            f"query is {len(value)} characters; at most {MAX_QUERY_CHARS} are accepted "
            "(search for the passage's key terms instead)",
            details={"argument": "query", "limit": MAX_QUERY_CHARS},
        )
    return value.strip()


def _fusion_mode(request: SearchRequest) -> str:
    """The mode: as given, else the one the fusion parameter given belongs to, else hybrid. A
    fusion parameter of another mode would do nothing, so it is an error naming both."""
    given = [name for name in FUSION_PARAMETERS if getattr(request, name) is not None]
    if request.mode is None:
        if len(given) > 1:
            raise InvalidRequest(
                f"{', '.join(given)}: each belongs to another mode "
                f"({', '.join(f'{name}: {FUSION_PARAMETERS[name]}' for name in given)}); pass "
                "the one of the mode you want, or a mode",
                details={"argument": given[0], "arguments": given},
            )
        return FUSION_PARAMETERS[given[0]] if given else DEFAULT_MODE
    mode = _mode(request.mode)
    for name in given:
        if FUSION_PARAMETERS[name] != mode:
            raise InvalidRequest(
                f"{name}: applies to mode {FUSION_PARAMETERS[name]} only and would do nothing in "
                f"mode {shown(request.mode)}; drop {name} or pass mode "
                f"{shown(FUSION_PARAMETERS[name])}",
                details={"argument": name, "arguments": [name, "mode"]},
            )
    return mode


def _mode(value: Any) -> str:
    mode = value.strip().lower() if isinstance(value, str) else None
    mode = MODE_ALIASES.get(mode, mode) if mode is not None else None
    if mode not in MODES:
        valid = [*MODES, *MODE_ALIASES]
        raise InvalidRequest(
            f"mode must be one of: {', '.join(valid)} (got {shown(value)})",
            details={"argument": "mode", "valid": valid},
        )
    return mode
