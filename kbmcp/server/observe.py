"""What the server sees of its calls, for the audit trail (kbmcp/service/audit.py) and the
Prometheus metrics (kbmcp/server/metrics.py).

- `ToolObserver`, server middleware for `tools/call`: times every call and counts it by tool,
  mode and outcome; records in the audit trail every write tool's call (whatever its outcome),
  every refused call of any tool (`forbidden`, `resource_unavailable`, with the ids it named)
  and counts searches per token. It sits outside the scope guard, so a call refused for its
  scope is seen too.
- `HttpObserver`, ASGI middleware of the HTTP app: records requests refused with 401 before any
  MCP handling (an unusable bearer token: the token id the secret names, never the secret),
  and serves GET /metrics behind the same authentication as /mcp: with tokens, a bearer token
  carrying the `metrics:read` scope; without (a loopback server), as the local owner.
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.auth.provider import TokenVerifier
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbmcp.access import METRICS_READ, Principal
from kbmcp.errors import KbError
from kbmcp.server.auth import PrincipalSource
from kbmcp.server.metrics import CONTENT_TYPE, METRICS_PATH, ServerMetrics
from kbmcp.server.protocol import lowlevel
from kbmcp.service.audit import REFUSALS, UNAUTHORIZED, VIA_HTTP, VIA_STDIO, AuditTrail, ids_in
from kbmcp.tokens import token_id_of
from kbmcp.workspace import Workspace

logger = logging.getLogger(__name__)

SEARCH_TOOL = "search_knowledge"
WRITE_TOOLS = frozenset({"remember", "forget"})
# search_knowledge's arguments that make a targeted read (kbmcp/server/tools.py READ_ARGS).
READ_ARGUMENTS = ("document_id", "revision_id", "offset", "limit_chars", "outline")


@dataclass
class Observer:
    """A server's audit trail and metrics (one per server, found by `observer_of`)."""

    workspace: Workspace
    trail: AuditTrail
    metrics: ServerMetrics
    token_verifier: TokenVerifier | None


_OBSERVERS: weakref.WeakKeyDictionary[MCPServer, Observer] = weakref.WeakKeyDictionary()


def new_observer(
    workspace: Workspace, tools: list[str], token_verifier: TokenVerifier | None
) -> Observer:
    """The trail and metrics of a server about to be built (`attach` it once it is)."""
    return Observer(
        workspace,
        AuditTrail(workspace, VIA_STDIO),
        ServerMetrics(workspace, tools),
        token_verifier,
    )


def attach(observer: Observer, server: MCPServer) -> None:
    """Make `observer` the one of `server`: found by `http_observer`, counting its sessions."""

    def open_sessions() -> int | None:
        manager = getattr(lowlevel(server), "_session_manager", None)
        instances = getattr(manager, "_server_instances", None)
        return None if instances is None else len(instances)

    observer.metrics.sessions = open_sessions
    _OBSERVERS[server] = observer


def observer_of(server: MCPServer) -> Observer | None:
    return _OBSERVERS.get(server)


class ToolObserver:
    """Server middleware for `tools/call` (see the module docstring)."""

    def __init__(self, observer: Observer, principals: PrincipalSource) -> None:
        self._observer = observer
        self._principals = principals

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != "tools/call" or not isinstance(ctx.params, Mapping):
            return await call_next(ctx)
        tool = self._observer.metrics.tool_label(ctx.params.get("name"))
        arguments = ctx.params.get("arguments")
        arguments = arguments if isinstance(arguments, Mapping) else {}
        started = time.perf_counter()
        # A call that raises (malformed params: a JSON-RPC error, not a tool result) is counted
        # as a protocol error.
        outcome, content = "protocol_error", {}
        try:
            result = await call_next(ctx)
            outcome, content = _outcome(result)
            return result
        finally:
            try:  # the metrics and the trail never fail the call they describe
                mode = _mode(tool, arguments, content)
                seconds = time.perf_counter() - started
                self._observer.metrics.observe_call(tool, mode, outcome, seconds)
                self._audit(tool, arguments, outcome, content)
            except Exception:
                logger.exception("observing a %s call failed", tool)

    def _audit(
        self, tool: str, arguments: Mapping[str, Any], outcome: str, content: dict[str, Any]
    ) -> None:
        trail = self._observer.trail
        principal = self._principal()
        named = ids_in(arguments.values())
        if tool in WRITE_TOOLS:
            done = ids_in(content.get(key) for key in ("memory_id", "memory_store_id"))
            detail = {"outcome": content["outcome"]} if "outcome" in content else {}
            trail.record(principal, tool, outcome, ids_in([*named, *done]), detail)
        elif outcome in REFUSALS:
            trail.record(principal, tool, outcome, named)
        elif tool == SEARCH_TOOL:
            query = arguments.get("query")
            trail.count_search(principal, query if isinstance(query, str) else None)

    def _principal(self) -> Principal | None:
        try:
            return self._principals.current()
        except KbError:
            return None


def _outcome(result: HandlerResult) -> tuple[str, dict[str, Any]]:
    """`ok` and the structured content, or the error's code (and nothing)."""
    if isinstance(result, CallToolResult):  # (read as is: dumping a large result costs)
        if not result.is_error:
            content = result.structured_content
            return "ok", content if isinstance(content, dict) else {}
        wire = {"isError": True, "content": [b.model_dump() for b in result.content]}
    elif isinstance(result, dict):
        wire = result
    else:
        return "ok", {}
    if not wire.get("isError"):
        content = wire.get("structuredContent")
        return "ok", content if isinstance(content, dict) else {}
    for block in wire.get("content", []):
        try:
            code = json.loads(block.get("text", ""))["error"]["code"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(code, str):
            return code, {}
    return "internal_error", {}


def _mode(tool: str, arguments: Mapping[str, Any], content: Mapping[str, Any]) -> str:
    """search_knowledge's request mode (as its response says, or as its arguments make it);
    empty for the other tools."""
    if tool != SEARCH_TOOL:
        return ""
    mode = content.get("request_mode")
    if isinstance(mode, str):
        return mode
    if arguments.get("query") is not None:
        return "query"
    if arguments.get("chunk_ids") is not None:
        return "fetch"
    if any(arguments.get(name) is not None for name in READ_ARGUMENTS):
        return "outline" if arguments.get("outline") is True else "read"
    return "scan"


# ------------------------------------------------------------------ HTTP


def http_observer(
    server: MCPServer, app: ASGIApp, sessions: Callable[[], int] | None = None
) -> ASGIApp:
    """`app` with 401s recorded and GET /metrics served (for the server's HTTP app);
    `sessions` counts the open MCP sessions."""
    observer = observer_of(server)
    if observer is None:
        return app
    observer.trail.via = VIA_HTTP
    if sessions is not None:
        observer.metrics.sessions = sessions
    return HttpObserver(app, observer)


class HttpObserver:
    def __init__(self, app: ASGIApp, observer: Observer) -> None:
        self._app = app
        self._observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["path"] == METRICS_PATH:
            await self._metrics(scope, send)
            return
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self._app(scope, receive, watch)
        action = "mcp" if scope["path"].startswith("/mcp") else "web"  # (the web page's paths)
        if status == 401:
            await self._refused(scope, action)
        elif status == 403:  # (the SDK's answer to a token without a required scope)
            self._observer.metrics.refused.labels("403").inc()
            secret = _bearer(scope)
            token_id = None if secret is None else token_id_of(secret)
            tenant_id = 0
            if token_id is not None:
                _, tenant_id = await anyio.to_thread.run_sync(self._token_state, token_id)
            self._observer.trail.record(
                None, action, "forbidden", token_id=token_id, tenant_id=tenant_id
            )

    async def _metrics(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _reply(send, 405, b"GET /metrics\n", headers=[(b"allow", b"GET, HEAD")])
            return
        verifier = self._observer.token_verifier
        if verifier is not None:
            token = await verifier.verify_token(_bearer(scope) or "")
            if token is None:
                await self._refused(scope, "metrics")
                await _reply(
                    send,
                    401,
                    b"a bearer token with the metrics:read scope is required\n",
                    headers=[(b"www-authenticate", b'Bearer error="invalid_token"')],
                )
                return
            if METRICS_READ not in token.scopes:
                self._observer.trail.record(
                    None, "metrics", "forbidden", token_id=token.client_id,
                    tenant_id=int((token.claims or {}).get("tenant_id", 0)),
                )  # fmt: skip
                await _reply(send, 403, b"this token lacks the metrics:read scope\n")
                return
        body = await anyio.to_thread.run_sync(self._observer.metrics.exposition)
        await _reply(send, 200, body if scope["method"] == "GET" else b"", CONTENT_TYPE)

    async def _refused(self, scope: Scope, action: str) -> None:
        """A request refused for its token: counted, and recorded with the token it names."""
        self._observer.metrics.refused.labels("401").inc()
        secret = _bearer(scope)
        token_id = None if secret is None else token_id_of(secret)
        reason = "no bearer token" if secret is None else "not a kbmcp token"
        tenant_id = 0
        if token_id is not None:
            reason, tenant_id = await anyio.to_thread.run_sync(self._token_state, token_id)
        self._observer.trail.record(
            None, action, UNAUTHORIZED, [], {"reason": reason},
            token_id=token_id, tenant_id=tenant_id,
        )  # fmt: skip

    def _token_state(self, token_id: str) -> tuple[str, int]:
        """Why the token a refused secret names is not usable (unknown, revoked, expired, wrong
        secret: the one left when it is usable), and its tenant (0: unknown)."""
        from kbmcp.clock import system_now_iso

        workspace = self._observer.workspace
        stored = workspace.store.grants.stored_token(workspace.conn, token_id)
        if stored is None:
            return "unknown token", 0
        if stored.revoked_at is not None:
            return "revoked", stored.tenant_id
        if stored.expires_at is not None and stored.expires_at <= system_now_iso():
            return "expired", stored.tenant_id
        return "wrong secret", stored.tenant_id


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
    return None


async def _reply(
    send: Send,
    status: int,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode("latin-1")),
                (b"content-length", str(len(body)).encode("latin-1")),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
