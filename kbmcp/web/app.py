"""The web page as an ASGI app, and how it sits next to the MCP endpoint on one port.

`web_app` builds the pages' Starlette app; `with_web_ui(mcp_app, web)` answers the page's paths
(`owns`) with it and everything else (`/mcp`, `/health`, the lifespan) with the MCP app. Put
it inside the server's Host/Origin check and request-size limit, so the page is guarded
exactly as `/mcp` is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from mcp.server.auth.provider import TokenVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kbmcp.server.tools import ServerOptions
from kbmcp.web.auth import WebAuth
from kbmcp.web.headers import SecurityHeaders
from kbmcp.web.pages import Pages
from kbmcp.workspace import Workspace

# The page's own paths; every other path (/mcp, /health, whatever the SDK serves) is not its.
PAGE_PATHS = frozenset({"/", "/search", "/server", "/sign-in", "/favicon.ico"})
PAGE_PREFIXES = ("/kb/", "/doc/", "/memories/", "/forget/", "/static/")
STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}


def owns(path: str) -> bool:
    return path in PAGE_PATHS or path.startswith(PAGE_PREFIXES)


def web_app(
    workspace: Workspace,
    *,
    verifier: TokenVerifier | None,
    options: ServerOptions | None = None,
) -> ASGIApp:
    """The pages over `workspace`. `verifier`: the MCP endpoint's token verifier (None when
    the server runs without tokens, as the local owner); `options`: the MCP tools' options, so
    a search here runs as `search_knowledge` runs."""
    pages = Pages(workspace, WebAuth(workspace, verifier), options or ServerOptions())
    static = StaticFiles()
    routes = [
        Route("/", pages.page(pages.home)),
        Route("/kb/{kb_id}", pages.page(pages.documents)),
        Route("/search", pages.page(pages.search)),
        Route("/doc/{document_id}", pages.page(pages.reader)),
        Route("/memories/{store_id}", pages.page(pages.memory_store)),
        Route("/forget/{memory_id}", pages.page(pages.forget), methods=["GET", "POST"]),
        Route("/server", pages.page(pages.server)),
        Route("/sign-in", pages.needs_script, methods=["POST"]),
        Route("/static/{name}", static.serve),
        # Browsers ask for it on pages that name no icon (a file opened on its own).
        Route("/favicon.ico", static.icon),
    ]
    return SecurityHeaders(Starlette(routes=routes))


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    media_type: str
    etag: str


class StaticFiles:
    """The files of kbmcp/web/static, read once: only those names are served (no path is
    resolved from a request). Browsers revalidate them with their ETag."""

    def __init__(self) -> None:
        self.files: dict[str, StaticFile] = {}
        for entry in resources.files("kbmcp.web").joinpath("static").iterdir():
            suffix = "." + entry.name.rpartition(".")[2]
            if entry.is_file() and suffix in STATIC_TYPES:
                body = entry.read_bytes()
                etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
                self.files[entry.name] = StaticFile(body, STATIC_TYPES[suffix], etag)

    async def serve(self, request: Request) -> Response:
        found = self.files.get(request.path_params["name"])
        if found is None:
            return Response("no such file\n", status_code=404, media_type="text/plain")
        headers = {"ETag": found.etag, "Cache-Control": "no-cache"}
        if request.headers.get("if-none-match") == found.etag:
            return Response(status_code=304, headers=headers)
        return Response(found.body, media_type=found.media_type, headers=headers)

    async def icon(self, request: Request) -> Response:
        request.path_params["name"] = "favicon.svg"
        return await self.serve(request)


class WithWebUi:
    """`web` for the page's paths, `mcp_app` for everything else (and the lifespan)."""

    def __init__(self, mcp_app: ASGIApp, web: ASGIApp) -> None:
        self.mcp_app = mcp_app
        self.web = web

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and owns(scope["path"]):
            await self.web(scope, receive, send)
        else:
            await self.mcp_app(scope, receive, send)


def with_web_ui(mcp_app: ASGIApp, web: ASGIApp) -> ASGIApp:
    return WithWebUi(mcp_app, web)
