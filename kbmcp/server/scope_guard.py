"""Tools a caller's scopes do not cover are hidden from `tools/list` (and from the server's
instructions) and refused if called.

Every registered tool names the scopes it accepts in `TOOL_SCOPES` (any one of them will do);
`build_server` refuses to start with a tool missing from it, so a new tool cannot slip out
unguarded. A refused call is a tool error with code `forbidden` naming the scope, before the
tool's arguments are even looked at. search_knowledge accepts either read scope: its service
decides which kinds (documents, memories) the caller's scopes let it search.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import ListToolsResult
from pydantic import BaseModel

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, MEMORY_WRITE, Principal
from kbmcp.errors import Forbidden, KbError
from kbmcp.server.auth import PrincipalSource
from kbmcp.server.errors import kb_error_result

# The requests whose result carries the server's instructions, in the two protocol eras.
INSTRUCTED = frozenset({"initialize", "server/discover"})

TOOL_SCOPES: dict[str, tuple[str, ...]] = {
    "search_knowledge": (KNOWLEDGE_READ, MEMORY_READ),
    "list_knowledge_bases": (KNOWLEDGE_READ,),
    "list_documents": (KNOWLEDGE_READ,),
    "list_memory_stores": (MEMORY_READ,),
    "remember": (MEMORY_WRITE,),
    "forget": (MEMORY_WRITE,),
}


class ScopeGuard:
    """Server middleware for `tools/list` and `tools/call`, and for the instructions a client
    receives (`initialize`, `server/discover`): `instructions(tool_names)` writes them for the
    tools the caller sees."""

    def __init__(
        self,
        tool_scopes: Mapping[str, tuple[str, ...]],
        principals: PrincipalSource,
        instructions: Callable[[Collection[str]], str] | None = None,
    ) -> None:
        self._tool_scopes = tool_scopes
        self._principals = principals
        self._instructions = instructions

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/list":
            return self._visible(await call_next(ctx))
        if ctx.method in INSTRUCTED and self._instructions is not None:
            return self._instructed(await call_next(ctx))
        if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
            name = ctx.params.get("name")
            needed = self._tool_scopes.get(name) if isinstance(name, str) else None
            if needed is not None:
                try:
                    _require(self._principals.current(), needed, name)
                except KbError as error:
                    return kb_error_result(error)
        return await call_next(ctx)

    def _allowed(self) -> set[str]:
        """The tools the caller's scopes cover (none when there is no caller)."""
        try:
            scopes = self._principals.current().scopes
        except KbError:
            scopes = frozenset()
        return {name for name, needed in self._tool_scopes.items() if scopes & set(needed)}

    def _instructed(self, result: HandlerResult) -> HandlerResult:
        assert self._instructions is not None
        text = self._instructions(self._allowed())
        if isinstance(result, BaseModel) and hasattr(result, "instructions"):
            return result.model_copy(update={"instructions": text})
        if isinstance(result, dict):
            return {**result, "instructions": text}
        return result

    def _visible(self, result: HandlerResult) -> HandlerResult:
        allowed = self._allowed()
        if isinstance(result, ListToolsResult):
            return result.model_copy(
                update={"tools": [tool for tool in result.tools if tool.name in allowed]}
            )
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            return {**result, "tools": [t for t in result["tools"] if t.get("name") in allowed]}
        return result


def _require(principal: Principal, accepted: tuple[str, ...], tool: str) -> None:
    if not principal.scopes & set(accepted):
        named = " or ".join(f"'{scope}'" for scope in accepted)
        raise Forbidden(
            f"{tool} needs the {named} scope, which this token does not carry",
            details={"tool": tool, "required_scope": accepted[0]}
            if len(accepted) == 1
            else {"tool": tool, "required_scopes": list(accepted)},
        )
