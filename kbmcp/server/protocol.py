"""Protocol utilities beyond tools: `logging/setLevel` and `completion/complete`.

Both are declared capabilities (the SDK declares a capability when its handler is registered),
so clients that send them routinely get an answer instead of "Method not found":
- `logging/setLevel` is accepted and validated; kbmcp sends no log notifications to clients (its
  logs go to stderr, docs/operations.md), so there is nothing to filter;
- `completion/complete` answers an empty list: kbmcp has no prompts or resource templates whose
  arguments could be completed.
"""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    EmptyResult,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
)


def lowlevel(server: MCPServer) -> Server[Any]:
    """The low-level server under `server` (mcp 2.3 has no public accessor for it)."""
    return server._lowlevel_server


def add_protocol_handlers(server: MCPServer) -> None:
    lowlevel(server).add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)

    @server.completion()
    async def _complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        return Completion(values=[], total=0, has_more=False)


async def _set_level(ctx: object, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()
