"""A bound on the HTTP request body, checked before any work.

A request whose Content-Length exceeds MAX_REQUEST_BYTES is answered 413 with a JSON-RPC error
naming the size and the limit, before the body is read. Bodies sent without a Content-Length
are counted as they arrive by the SDK's own limit, set to the same number (run_http).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

# Far above any real request (a query, 100 document ids, 50 chunk ids are a few KB), far below
# what would take memory or time to parse.
MAX_REQUEST_BYTES = 2 * 1024 * 1024
INVALID_REQUEST = -32600
# An oversized body is read and dropped (not parsed) up to this size, so that the client, still
# sending, gets the 413 instead of a reset connection; past it the connection is closed.
DRAIN_LIMIT = 64 * 1024 * 1024


class RequestSizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        size = content_length(scope) if scope["type"] == "http" else None
        if size is None or size <= self.max_bytes:
            await self.app(scope, receive, send)
            return
        message = (
            f"request body too large: {size} bytes, the limit is {self.max_bytes} bytes "
            f"(queries and id lists are far smaller: check what the client sends)"
        )
        await _discard_body(receive, limit=DRAIN_LIMIT)
        await send_error_and_close(send, 413, message)


async def send_error_and_close(send: Send, status: int, message: str) -> None:
    """An HTTP error response whose body is a JSON-RPC error (-32600, id null), closing the
    connection after it."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _discard_body(receive: Receive, limit: int) -> None:
    seen = 0
    while seen <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def content_length(scope: Scope) -> int | None:
    """The request's Content-Length header (None: absent or not a number)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
