"""Who a tool call runs as: bearer tokens over HTTP, KBMCP_TOKEN or the local owner over stdio.

- HTTP with tokens: the SDK's bearer middleware calls `StoreTokenVerifier.verify_token` on every
  request (a missing, unknown, expired or revoked token is a 401 with `WWW-Authenticate` before
  any MCP handling); the verified principal travels in the `AccessToken` and a tool reads it back
  with `get_access_token()` (`BearerPrincipals`).
- stdio with KBMCP_TOKEN: the token is checked again on every call, so revoking it takes effect
  on the next call (`TokenPrincipals`).
- Otherwise (stdio, HTTP on loopback without tokens): the local owner (`LocalOwner`).
The principal decides what is readable (kbmcp/access.py); scopes decide which tools a caller sees
(kbmcp/server/scope_guard.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

from kbmcp.access import Principal, principal_for_secret, principal_for_token_id, readable_ids
from kbmcp.errors import Forbidden
from kbmcp.server.host_check import binds_loopback_only
from kbmcp.store.backend import Connection
from kbmcp.workspace import Workspace

logger = logging.getLogger(__name__)
T = TypeVar("T")

# The SDK's AuthSettings wants an issuer URL; kbmcp issues its own tokens (`kbmcp token create`)
# and runs no OAuth endpoints, so this value is never served or compared.
AUTH_SETTINGS = AuthSettings(issuer_url="http://localhost/kbmcp", resource_server_url=None)


class PrincipalSource(Protocol):
    def current(self) -> Principal:
        """The principal of the call being handled; raises Forbidden if there is none."""
        ...


class LocalOwner:
    """The single-user default: the local owner, every scope."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._principal: Principal | None = None

    def current(self) -> Principal:
        if self._principal is None:
            self._principal = self._workspace.run_request(self._workspace.local_principal)
        return self._principal


class TokenPrincipals:
    """One token for the whole process (stdio with KBMCP_TOKEN), re-checked on every call."""

    def __init__(self, workspace: Workspace, secret: str) -> None:
        self._workspace = workspace
        self._secret = secret

    def current(self) -> Principal:
        workspace = self._workspace
        principal = workspace.run_request(
            lambda: principal_for_secret(workspace.store, workspace.conn, self._secret)
        )
        if principal is None:
            raise Forbidden(
                "KBMCP_TOKEN is not a usable token (unknown, expired or revoked)",
                details={"argument": "KBMCP_TOKEN"},
            )
        return principal


class BearerPrincipals:
    """HTTP with authentication: the principal of the request's verified bearer token."""

    def current(self) -> Principal:
        token = get_access_token()
        if token is None:
            # Never falls back to the local owner: no token, no access.
            raise Forbidden("this call carries no verified bearer token")
        return principal_from_access_token(token)


class StoreTokenVerifier:
    """The SDK's `TokenVerifier`, checking secrets against the token table of the database.

    The lookup is one indexed row and a constant-time hash comparison, a read: it runs on the
    event loop's thread with that thread's connection and never waits for the workspace lock
    held by a writer (WAL: readers never block). As a request of its own (`run_request`), it
    is made again on a new connection when the PostgreSQL server dropped the old one (a
    restart, a failover), and the connection is idle between requests (closed after a while
    on PostgreSQL: kbmcp/leases.py).

    The same way it answers what an HTTP session's token may read now (`readable_now`), which
    its resumable events are checked against (kbmcp/server/event_store.py)."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self._read(
            lambda conn: principal_for_secret(self._workspace.store, conn, token)
        )
        if principal is None:
            logger.info("refused a bearer token (malformed, unknown, expired or revoked)")
            return None
        return access_token_for(principal)

    async def readable_now(self, token_id: str) -> frozenset[int] | None:
        """The knowledge bases and memory stores the token can read now; None once the token
        is revoked, expired or gone."""
        store = self._workspace.store

        def look_up(conn: Connection) -> frozenset[int] | None:
            principal = principal_for_token_id(store, conn, token_id)
            return None if principal is None else readable_ids(store, conn, principal)

        return self._read(look_up)

    def _read(self, read: Callable[[Connection], T]) -> T:
        workspace = self._workspace
        return workspace.run_request(lambda: read(workspace.conn))


def access_token_for(principal: Principal) -> AccessToken:
    """The SDK's record of a verified request. `client_id` is the token id: the SDK binds each
    HTTP session to it, so a session cannot be continued with another token. `expires_at` is
    left unset: expiry is checked in `principal_for_secret` on every request, against the
    machine's clock (`kbmcp.clock.system_now`; KBMCP_NOW never applies to tokens), so there is
    one expiry check, not two."""
    assert principal.token_id is not None
    return AccessToken(
        token=principal.token_id,  # the id, not the secret: nothing downstream needs the secret
        client_id=principal.token_id,
        scopes=sorted(principal.scopes),
        subject=principal.tenant_public_id,
        claims={
            "tenant_id": principal.tenant_id,
            "knowledge_base_ids": None
            if principal.knowledge_base_allowlist is None
            else sorted(principal.knowledge_base_allowlist),
        },
    )


def principal_from_access_token(token: AccessToken) -> Principal:
    claims = token.claims or {}
    allow = claims.get("knowledge_base_ids")
    assert token.subject is not None
    return Principal(
        tenant_id=int(claims["tenant_id"]),
        tenant_public_id=token.subject,
        scopes=frozenset(token.scopes),
        knowledge_base_allowlist=None if allow is None else frozenset(allow),
        token_id=token.client_id,
    )


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only: the address
    the name resolves to is a loopback address (kbmcp/server/host_check.py)."""
    return binds_loopback_only(host)
