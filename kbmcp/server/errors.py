"""Tool errors with stable codes.

Every failed tool call is a tool result with `isError: true` whose single text block is the JSON
body `{"error": {"code", "message", "details"}}` (see kbmcp/errors.py). Three sources:
- a `KbError` raised by the service layer or our argument checks: rendered by `error_result`;
- an argument the tool does not have (a typo, or a parameter of another mode), or a required one
  missing: `invalid_request` from `ToolCallGuard`, before the tool runs (the SDK would silently
  ignore the first and answer the second in plain text);
- anything the SDK reports itself (an unexpected crash): its plain text is wrapped by
  `ToolCallGuard` into `internal_error` so no error lacks a code.
A tool that does not exist is not a tool result but a JSON-RPC error, -32602 (invalid params), as
the MCP specification says. Other requests fail with JSON-RPC errors too; `RequestErrorGuard`
makes sure each has a valid code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from pydantic import ValidationError

from kbmcp.errors import KbError
from kbmcp.server.arguments import suggestion

logger = logging.getLogger(__name__)


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def error_result(body: dict[str, Any]) -> CallToolResult:
    text = json.dumps(body, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def kb_error_result(error: KbError) -> CallToolResult:
    return error_result(error.to_dict())


class ToolCallGuard:
    """Server middleware for `tools/call`: rejects unknown tools (JSON-RPC -32602), unknown and
    missing arguments, and gives every error result a stable code. `known_arguments(tool_name)`
    returns the tool's parameter names (None for a tool it does not know: the SDK decides
    whether it exists) and `required_arguments(tool_name)` those it cannot do without."""

    def __init__(
        self,
        known_arguments: Callable[[str], set[str] | None],
        required_arguments: Callable[[str], set[str] | None] = lambda name: None,
    ) -> None:
        self._known_arguments = known_arguments
        self._required_arguments = required_arguments

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != "tools/call" or not isinstance(ctx.params, Mapping):
            return await call_next(ctx)
        name = ctx.params.get("name")
        arguments = ctx.params.get("arguments") or {}
        known = self._known_arguments(name) if isinstance(name, str) else None
        if known is not None and isinstance(arguments, Mapping):
            unknown = sorted(key for key in arguments if key not in known)
            if unknown:
                return error_result(_unknown_arguments(name, unknown, known))
            missing = sorted((self._required_arguments(name) or set()) - set(arguments))
            if missing:
                return error_result(
                    error_body(
                        "invalid_request",
                        f"{', '.join(missing)}: required by {name} (see its input schema)",
                        {"argument": missing[0], "arguments": missing},
                    )
                )
        result = await call_next(ctx)
        return _with_code(result, name)


def _unknown_arguments(tool: str, unknown: list[str], known: set[str]) -> dict[str, Any]:
    """invalid_request naming the unknown arguments, with the name to use for those that are a
    known name of the same thing elsewhere (max_results -> limit) or a near miss (querry)."""
    suggestions = {name: hint for name in unknown if (hint := suggestion(name, known))}
    if len(unknown) == 1:
        hints = "".join(f"; did you mean {hint}?" for hint in suggestions.values())
    else:
        named = ", ".join(f"{hint} for {name}" for name, hint in suggestions.items())
        hints = f"; did you mean {named}?" if suggestions else ""
    details: dict[str, Any] = {"argument": unknown[0], "arguments": unknown}
    if suggestions:
        details["suggestions"] = suggestions
    message = (
        f"{', '.join(unknown)}: not an argument of {tool}{hints} "
        f"(known: {', '.join(sorted(known))})"
    )
    return error_body("invalid_request", message, details)


def _with_code(result: HandlerResult, tool: object) -> HandlerResult:
    """Wrap a plain-text SDK error into our JSON error body; leave everything else alone. The
    SDK answers a tool it does not have with a tool result; that becomes the JSON-RPC error the
    MCP specification asks for. Results reach middleware in wire form (a dict with camelCase
    keys) or as a model."""
    if isinstance(result, CallToolResult):
        wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    elif isinstance(result, dict):
        wire = result
    else:
        return result
    if not wire.get("isError"):
        return result
    texts = [b.get("text", "") for b in wire.get("content", []) if b.get("type") == "text"]
    text = "\n".join(texts)
    if _is_error_body(text):
        return result
    if text.startswith("Unknown tool"):  # the SDK's text for a name it has no tool for
        raise MCPError(code=INVALID_PARAMS, message=text, data=tool)
    body = error_body("internal_error", f"{text} (see the server log on stderr)", {"tool": tool})
    content = [{"type": "text", "text": json.dumps(body, ensure_ascii=False)}]
    return {**wire, "content": content}


def _is_error_body(text: str) -> bool:
    try:
        body = json.loads(text)
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


# Methods whose params name a thing (a prompt, a resource): the SDK raises ValueError when it
# does not exist, which is the caller's invalid parameter.
NAMED_BY_PARAMS = frozenset({"prompts/get", "resources/read", "completion/complete"})


class RequestErrorGuard:
    """Server middleware for every request: an exception the SDK would answer with JSON-RPC
    error code 0 (not a valid code) becomes -32602 (an unknown prompt or resource: the SDK
    raises ValueError) or -32603 (anything else, logged with its traceback on stderr)."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        try:
            return await call_next(ctx)
        except (MCPError, ValidationError):
            raise
        except ValueError as exc:
            if ctx.method not in NAMED_BY_PARAMS:
                raise self._internal(ctx, exc) from exc
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        except Exception as exc:
            raise self._internal(ctx, exc) from exc

    @staticmethod
    def _internal(ctx: ServerRequestContext[Any, Any], error: Exception) -> MCPError:
        logger.error("%s failed", ctx.method, exc_info=error)
        message = f"internal error in {ctx.method} (see the server log on stderr)"
        return MCPError(code=INTERNAL_ERROR, message=message)
