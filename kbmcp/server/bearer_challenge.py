"""The 401 of a request that brought no bearer token at all: a bare challenge, no error code.

RFC 6750 section 3.1: when a request "lacks any authentication information (e.g., the client
was unaware that authentication is necessary or attempted using an unsupported authentication
method), the resource server SHOULD NOT include an error code or other error information". The
SDK's `RequireAuthMiddleware` answers every unauthenticated request with
`error="invalid_token"`, as if a token had been sent and refused. Here a request without an
`Authorization: Bearer ...` header (none, or another scheme such as Basic) gets
`WWW-Authenticate: Bearer realm="kbmcp"`; a bearer token that is malformed, unknown, expired or
revoked still gets the SDK's `error="invalid_token"`.
"""

from __future__ import annotations

import json

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from starlette.types import Receive, Scope, Send

CHALLENGE = b'Bearer realm="kbmcp"'
BODY = json.dumps(
    {"error_description": "authentication required: send 'Authorization: Bearer <token>'"}
).encode()


class RequireBearerToken(RequireAuthMiddleware):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser) or offers_bearer(scope):
            await super().__call__(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(BODY)).encode()),
                    (b"www-authenticate", CHALLENGE),
                ],
            }
        )
        await send({"type": "http.response.body", "body": BODY})


def offers_bearer(scope: Scope) -> bool:
    """Whether the request has an Authorization header of the Bearer scheme (any case), with or
    without a token after it."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            return value.split(b" ", 1)[0].strip().lower() == b"bearer"
    return False
