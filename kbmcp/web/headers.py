"""Response headers every page and file of the web page carries, and the same-origin rule for
requests that change something.

The Content-Security-Policy allows scripts, styles, images and requests from this origin only,
no inline script or style, no plugin, no framing (the forget button cannot be clickjacked), no
<base>, and forms posting only here: even a document whose text got into the page as markup
could run nothing. Pages are never cached (they show what the caller may read now), and no
Referer leaves the page (addresses hold search queries and ids).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NO_STORE = "no-store"


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response, and `Cache-Control: no-store` to those that set
    no caching of their own (pages; the static files set theirs)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if "cache-control" not in headers:
                    headers["Cache-Control"] = NO_STORE
            await send(message)

        await self.app(scope, receive, send_with_headers)


def cross_site(request: Request) -> str | None:
    """Why a request that changes something does not come from this page, or None when it does.

    Needed without tokens only: the page then acts as the local owner for anyone who reaches it,
    and another site's page (even one on localhost, on another port, which the loopback check
    lets through) could post a plain form to it. A browser names the page a request comes from:
    `Origin` on every POST, and `Sec-Fetch-Site` (Chromium, Firefox, Safari). So `Origin`, when
    sent, must name the host and port the request was sent to (`Host`), and `Sec-Fetch-Site`,
    when sent, be `same-origin`. A client that sends neither is no browser (curl, a script),
    which could send anything anyway. With tokens a request needs the token, which another
    site's page cannot make the browser send."""
    origin = request.headers.get("origin")
    host = request.headers.get("host", "").lower()
    if origin is not None and urlsplit(origin.strip()).netloc.lower() != host:
        return f"the Origin header {origin[:100]!r} is not this page's origin"
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return f"the request comes from another site (Sec-Fetch-Site: {fetch_site[:40]})"
    return None
