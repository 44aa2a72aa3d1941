"""What the pages say about the caller and about memories, in words and numbers.

- `Identity`: who the page runs as and exactly what that lets it see and do (the scopes of a
  token, in words, and its knowledge-base allow-list).
- `decay_weight`: a memory's recency weight now, the factor a search multiplies its score by.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kbmcp.access import (
    KNOWLEDGE_READ,
    KNOWLEDGE_WRITE,
    MEMORY_READ,
    MEMORY_WRITE,
    METRICS_READ,
    TOKEN_SCOPES,
)
from kbmcp.clock import parse_timestamp
from kbmcp.web.auth import Caller

# What each scope lets this page (and an MCP client) do, in the order scopes are listed.
SCOPE_WORDS = {
    KNOWLEDGE_READ: "list and search knowledge bases and read their documents",
    KNOWLEDGE_WRITE: "add documents (from the command line; this page only reads them)",
    MEMORY_READ: "list and search memory stores and read their memories",
    MEMORY_WRITE: "forget memories (and remember new ones over MCP)",
    METRICS_READ: "read the server's Prometheus metrics (GET /metrics)",
}
DAY_SECONDS = 86_400.0


@dataclass(frozen=True)
class Identity:
    local_owner: bool
    token_id: str | None
    tenant_id: str
    scopes: list[str]
    # Public ids of the knowledge bases the token is limited to; None: no such limit.
    allowlist: list[str] | None
    can: list[str]  # what the scopes allow, in words
    cannot: list[str]  # what they do not


def identity(caller: Caller) -> Identity:
    principal = caller.principal
    scopes = [scope for scope in TOKEN_SCOPES if scope in principal.scopes]
    allow = principal.knowledge_base_allowlist
    return Identity(
        local_owner=caller.local_owner,
        token_id=principal.token_id,
        tenant_id=principal.tenant_public_id,
        scopes=scopes,
        allowlist=None if allow is None else sorted(allow),
        can=[SCOPE_WORDS[scope] for scope in scopes],
        cannot=[SCOPE_WORDS[scope] for scope in TOKEN_SCOPES if scope not in scopes],
    )


def decay_weight(updated_at: str, half_life_days: float, now: datetime) -> float | None:
    """2^(-age_days / half_life_days), the age counted from `updated_at` and never negative:
    the weight search multiplies a memory's fused score by (the ranking statements of both
    backends compute the same, with the same clock, kbmcp/clock.py). None when decay is off
    (a half-life of 0)."""
    if half_life_days <= 0:
        return None
    age_days = max((now - parse_timestamp(updated_at)).total_seconds() / DAY_SECONDS, 0.0)
    return float(2.0 ** (-age_days / half_life_days))
