"""What a token can be given: its scopes and the longest expiry. Plain values, so that the
command line can offer them (`kbmcp token create --scope`, `--expires`) without loading the
access layer."""

from __future__ import annotations

KNOWLEDGE_READ = "knowledge:read"
KNOWLEDGE_WRITE = "knowledge:write"
MEMORY_READ = "memory:read"
MEMORY_WRITE = "memory:write"
# GET /metrics of the HTTP server: deployment-wide figures (every tenant's knowledge-base names
# and counts), for a monitoring system's token, never an agent's (docs/operations.md).
METRICS_READ = "metrics:read"
# The scopes a token can carry, in display order.
TOKEN_SCOPES = (KNOWLEDGE_READ, KNOWLEDGE_WRITE, MEMORY_READ, MEMORY_WRITE, METRICS_READ)
MAX_EXPIRY_DAYS = 3650  # ten years
