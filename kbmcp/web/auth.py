"""Who a page request runs as: the same rules, and the same token check, as `/mcp`.

- Without a token verifier (the file has no usable token; the server then binds loopback only
  and refuses other Host and Origin headers): the local owner, as an MCP client gets.
- With one: the request must carry `Authorization: Bearer <secret>`, checked by the verifier
  the MCP endpoint uses (`StoreTokenVerifier.verify_token`: a missing, malformed, unknown,
  expired or revoked secret is refused), and runs as that token's principal: its tenant,
  scopes and knowledge-base allow-list (kbmcp/access.py). Revoking a token shuts the page out
  on its next request. There is no cookie and no server-side session: the page's script sends
  the header from the tab's sessionStorage (kbmcp/web/static/kbmcp.js).
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from mcp.server.auth.provider import TokenVerifier
from starlette.requests import Request

from kbmcp.access import ALL_SCOPES, Principal
from kbmcp.server.auth import LocalOwner, principal_from_access_token
from kbmcp.workspace import Workspace

BEARER = "bearer "


@dataclass(frozen=True)
class Caller:
    principal: Principal
    # The local owner of a file without tokens (every scope, including the operator's).
    local_owner: bool

    def may(self, scope: str) -> bool:
        return scope in self.principal.scopes


class TokenNeeded(Exception):
    """The server has tokens and the request carries no usable one (`refused`: it carried one
    that the verifier did not accept)."""

    def __init__(self, refused: bool) -> None:
        super().__init__("a bearer token is needed")
        self.refused = refused


class WebAuth:
    def __init__(self, workspace: Workspace, verifier: TokenVerifier | None) -> None:
        self._verifier = verifier
        self._local = LocalOwner(workspace)

    @property
    def tokens_required(self) -> bool:
        return self._verifier is not None

    async def caller(self, request: Request) -> Caller:
        if self._verifier is None:
            # The first call may record the local tenant (a write): not on the event loop.
            principal = await anyio.to_thread.run_sync(self._local.current)
            return Caller(principal, local_owner=principal.scopes == ALL_SCOPES)
        header = request.headers.get("authorization", "")
        # Read as the SDK's bearer middleware reads it, so the page and /mcp accept the same.
        if not header.lower().startswith(BEARER):
            raise TokenNeeded(refused=False)
        verified = await self._verifier.verify_token(header[len(BEARER) :])
        if verified is None:
            raise TokenNeeded(refused=True)
        return Caller(principal_from_access_token(verified), local_owner=False)
