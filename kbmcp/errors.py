"""Errors every layer raises and every adapter (CLI, MCP) renders the same way.

A `KbError` carries a stable machine-readable `code`, a human message and structured details. The
MCP server turns it into a tool error with the JSON body `{"error": {...}}`; the CLI prints the
message on one line and exits non-zero.
"""

from __future__ import annotations

from typing import Any


class KbError(Exception):
    """A failure the caller can act on. `code` is part of the public contract."""

    code: str = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class InvalidRequest(KbError):
    """The request is malformed: a bad argument value, a conflict between arguments."""

    code = "invalid_request"


class QueryRequired(KbError):
    code = "query_required"


class ResourceUnavailable(KbError):
    """The id is well-formed but names nothing the caller can read (missing or not theirs)."""

    code = "resource_unavailable"


class Forbidden(KbError):
    code = "forbidden"


class ModelMismatch(KbError):
    """The file was built with another embedding model than the one configured."""

    code = "model_mismatch"


class ModelUnavailable(KbError):
    code = "model_unavailable"


class StoreError(KbError):
    code = "store_error"


class ReadOnly(KbError):
    """The file is open read-only (read-only mount, no write permission): writes are refused."""

    code = "read_only"


class DiskFull(KbError):
    """No space left for a write: it was rolled back whole, nothing stored before is lost."""

    code = "disk_full"
