"""Tools a caller's scopes do not cover are hidden from `tools/list` and refused if called.

Every registered tool names the scope it needs in `TOOL_SCOPES`; `build_server` refuses to start
with a tool missing from it, so a new tool cannot slip out unguarded. A refused call is a tool
error with code `forbidden` naming the scope, before the tool's arguments are even looked at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import ListToolsResult

from kbmcp.access import KNOWLEDGE_READ, Principal
from kbmcp.errors import Forbidden, KbError
from kbmcp.server.auth import PrincipalSource
from kbmcp.server.errors import kb_error_result

TOOL_SCOPES: dict[str, str] = {
    "search_knowledge": KNOWLEDGE_READ,
    "list_knowledge_bases": KNOWLEDGE_READ,
    "list_documents": KNOWLEDGE_READ,
}


class ScopeGuard:
    """Server middleware for `tools/list` and `tools/call`."""

    def __init__(self, tool_scopes: Mapping[str, str], principals: PrincipalSource) -> None:
        self._tool_scopes = tool_scopes
        self._principals = principals

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/list":
            return self._visible(await call_next(ctx))
        if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
            name = ctx.params.get("name")
            needed = self._tool_scopes.get(name) if isinstance(name, str) else None
            if needed is not None:
                try:
                    _require(self._principals.current(), needed, name)
                except KbError as error:
                    return kb_error_result(error)
        return await call_next(ctx)

    def _visible(self, result: HandlerResult) -> HandlerResult:
        try:
            scopes = self._principals.current().scopes
        except KbError:
            scopes = frozenset()
        allowed = {name for name, scope in self._tool_scopes.items() if scope in scopes}
        if isinstance(result, ListToolsResult):
            return result.model_copy(
                update={"tools": [tool for tool in result.tools if tool.name in allowed]}
            )
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            return {**result, "tools": [t for t in result["tools"] if t.get("name") in allowed]}
        return result


def _require(principal: Principal, scope: str, tool: str) -> None:
    if scope not in principal.scopes:
        raise Forbidden(
            f"{tool} needs the '{scope}' scope, which this token does not carry",
            details={"tool": tool, "required_scope": scope},
        )
