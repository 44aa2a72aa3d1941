"""Protocol utilities beyond tools, and only the capabilities kbmcp really serves.

The SDK declares a capability when its handler is registered, so what is registered here is
what a client is promised, on both protocol eras (the 2025 initialize handshake and the
2026-07-28 discover):
- `completion/complete` answers an empty list: kbmcp has no prompts, and the arguments of its
  resource templates are opaque ids (resources/list lists the documents), so a client that asks
  gets an answer;
- `resources/list`, `resources/templates/list` and `resources/read` serve the caller's
  documents and memory stores (kbmcp/server/resources.py), so the `resources` capability is
  announced;
- no `logging/setLevel`: kbmcp sends no log notifications (its logs go to stderr,
  docs/operations.md), so there is nothing a level could filter and no `logging` capability;
- no subscriptions: resources are read on request and kbmcp sends no change notifications,
  and its tool list never changes while a client is connected, so `resources.subscribe` and
  every `listChanged` are false (`build_server` turns
  the SDK's `subscriptions/listen` off, which is what the 2026-07-28 flags derive from).
"""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)


def lowlevel(server: MCPServer) -> Server[Any]:
    """The low-level server under `server` (mcp 2.3 has no public accessor for it)."""
    return server._lowlevel_server


def add_protocol_handlers(server: MCPServer) -> None:
    @server.completion()
    async def _complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        return Completion(values=[], total=0, has_more=False)
