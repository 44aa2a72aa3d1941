"""The HTTP server's ASGI app: which layer runs in which order, and why.

Outermost first, for a request to /mcp:
1. `LoopbackOnly` (no tokens only): Host and Origin must name this machine (DNS rebinding).
2. `RequestSizeLimit`: a body larger than MAX_REQUEST_BYTES is refused before it is read.
3. Bearer authentication (tokens only): the SDK's `AuthenticationMiddleware` verifies the token
   against the database on every request, and `RequireBearerToken` answers 401 without one
   (kbmcp/server/bearer_challenge.py: no error code for a request that sent no token); a
   database that cannot answer is a 503 naming it (`store_unavailable`), not a 401.
4. `KbSessionManager`: sessions, each with its own resumable events; a new session at the
   session cap ends the longest-idle one. Because it runs after step 3, only an authenticated
   request can cost another session its place.
/health answers without authentication and without touching the database. The web page's paths
(kbmcp/web/, when served) are dispatched between steps 2 and 3: the page checks a token itself,
with the same verifier, so its sign-in page and static files answer without one. /metrics
(kbmcp/server/observe.py, also between steps 2 and 3) checks its own bearer token, for the
`metrics:read` scope; the same observer records every 401 in the audit trail.

kbmcp assembles this itself rather than take `MCPServer.streamable_http_app()`: that app builds
its own session manager (one event store for every session) and leaves no place between
authentication and the session manager.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationError, BaseUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from kbmcp.errors import StoreError
from kbmcp.server.auth import StoreTokenVerifier
from kbmcp.server.bearer_challenge import RequireBearerToken
from kbmcp.server.event_store import RETRY_MS, ReadableNow, ResumptionEvents
from kbmcp.server.host_check import LoopbackOnly
from kbmcp.server.http_limits import MAX_REQUEST_BYTES, RequestSizeLimit
from kbmcp.server.http_sessions import KbSessionManager, SessionLimits
from kbmcp.server.observe import http_observer
from kbmcp.server.protocol import lowlevel

MCP_PATH = "/mcp"
HEALTH_PATH = "/health"
INTERNAL_ERROR = -32603  # JSON-RPC

logger = logging.getLogger(__name__)


def http_app(
    server: MCPServer,
    *,
    verifier: StoreTokenVerifier | None,
    limits: SessionLimits,
    events: ResumptionEvents | None = None,
    web: Callable[[ASGIApp], ASGIApp] | None = None,
) -> ASGIApp:
    """The whole HTTP app for `server`: with `verifier`, every /mcp request needs a bearer
    token; without it the app answers loopback Host/Origin only. `web` puts the web page's
    paths (kbmcp/web/) beside it: outside the bearer layer (the page checks tokens itself, with
    the same verifier), inside the Host check and the size limit."""
    manager = KbSessionManager(
        lowlevel(server),
        events=events or ResumptionEvents(),
        readable_now=None if verifier is None else _readable_now_of(verifier),
        retry_interval=RETRY_MS,
        # kbmcp's own DNS-rebinding check (kbmcp/server/host_check.py) replaces the SDK's,
        # which knows three exact spellings of loopback.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=MAX_REQUEST_BYTES,
        session_idle_timeout=limits.idle_seconds,
        max_sessions=limits.max_sessions,
    )
    endpoint: ASGIApp = StreamableHTTPASGIApp(manager)
    middleware: list[Middleware] = []
    if verifier is not None:
        endpoint = RequireBearerToken(endpoint, required_scopes=[])
        middleware = [
            Middleware(
                AuthenticationMiddleware,
                backend=BearerUnlessStoreDown(verifier),
                on_error=store_unavailable,
            ),
            Middleware(AuthContextMiddleware),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app: ASGIApp = Starlette(
        routes=[
            Route(MCP_PATH, endpoint=endpoint),
            Route(HEALTH_PATH, endpoint=health, methods=["GET"]),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )
    app = app if web is None else web(app)
    # 401s into the audit trail, and GET /metrics (kbmcp/server/observe.py)
    app = http_observer(server, app, sessions=lambda: len(manager._server_instances))
    app = RequestSizeLimit(app)
    return app if verifier is not None else LoopbackOnly(app)


class BearerUnlessStoreDown(BearerAuthBackend):
    """The SDK's bearer check. A database that cannot answer (PostgreSQL down: the verifier's
    StoreError) is not a bad token, so never a 401, nor a 500 with a traceback: it becomes an
    AuthenticationError, which `store_unavailable` answers."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        try:
            return await super().authenticate(conn)
        except StoreError as error:
            raise AuthenticationError(error.message) from None


def store_unavailable(conn: HTTPConnection, error: Exception) -> Response:
    """503 with a JSON-RPC error naming the store's trouble; the client may try again."""
    logger.warning("refused a request: %s", error)
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INTERNAL_ERROR, "message": str(error), "data": {"code": "store_error"}},
    }
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


def _readable_now_of(verifier: StoreTokenVerifier) -> Callable[[str], ReadableNow]:
    def for_token(token_id: str) -> ReadableNow:
        return lambda: verifier.readable_now(token_id)

    return for_token


async def health(request: Request) -> JSONResponse:
    """GET /health for supervisors and load balancers: no authentication, no data."""
    return JSONResponse({"status": "ok"})
