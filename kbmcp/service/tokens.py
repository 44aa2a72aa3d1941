"""Bearer tokens: create (the secret is returned once), list, revoke, and count the usable ones.

A token is bound to one tenant, carries some of the four token scopes, optionally an allow-list
of knowledge bases (each must be readable by the tenant when the token is made) and an expiry.
Only the secret's hash is stored (kbmcp/tokens.py). Administration needs the ADMIN scope (the
local operator); checking a presented secret is `kbmcp.access.principal_for_secret`. Every token
time (created, expires, revoked, "usable now") comes from the machine's clock, never KBMCP_NOW
(kbmcp/clock.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from kbmcp.access import ADMIN, TOKEN_SCOPES, Principal, readable_kb_ids, tenant_principal
from kbmcp.clock import format_timestamp, system_now, system_now_iso
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.ids import check_id
from kbmcp.scopes import MAX_EXPIRY_DAYS
from kbmcp.service.tenants import resolve_knowledge_base, tenant_named
from kbmcp.store.catalog import TenantRef
from kbmcp.store.grants import NewToken, TokenRow
from kbmcp.tokens import hash_secret, new_secret
from kbmcp.workspace import Workspace, holding_lock

MAX_TOKEN_KBS = 100


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    tenant: str
    name: str
    scopes: list[str]
    knowledge_base_ids: list[str] | None  # None: every knowledge base the tenant can read
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    status: str  # active | expired | revoked


@dataclass(frozen=True)
class CreatedToken:
    token: TokenInfo
    secret: str  # shown once; only its hash is stored


@holding_lock
def create_token(
    workspace: Workspace,
    principal: Principal,
    *,
    tenant: str,
    scopes: Sequence[str],
    knowledge_bases: Sequence[str] = (),
    expires_days: int | None = None,
    name: str = "",
) -> CreatedToken:
    principal.require(ADMIN)
    wanted_scopes = _check_scopes(scopes)
    expires_at = _expiry(expires_days)
    owner = tenant_named(workspace, tenant, "tenant")
    kb_ids = _allow_list(workspace, owner.ref, knowledge_bases)
    token_id, secret = new_secret()
    token = NewToken(
        public_id=token_id,
        tenant_id=owner.id,
        name=name.strip(),
        secret_hash=hash_secret(secret),
        scopes=json.dumps(wanted_scopes),
        knowledge_base_ids=None if kb_ids is None else json.dumps(kb_ids),
        expires_at=expires_at,
    )
    store, conn = workspace.store, workspace.conn
    with store.write_transaction(conn):
        store.grants.insert_token(conn, token, system_now_iso())
    return CreatedToken(_token(workspace, token_id), secret)


def list_tokens(
    workspace: Workspace, principal: Principal, *, tenant: str | None = None
) -> list[TokenInfo]:
    principal.require(ADMIN)
    tenant_id = None if tenant is None else tenant_named(workspace, tenant, "tenant").id
    return _tokens(workspace, tenant_id=tenant_id)


@holding_lock
def revoke_token(workspace: Workspace, principal: Principal, token_id: str) -> TokenInfo:
    """Revoke a token: its next request is refused (idempotent for a revoked token)."""
    principal.require(ADMIN)
    public_id = check_id("token", token_id, argument="token_id")
    store, conn = workspace.store, workspace.conn
    with store.write_transaction(conn):
        found = _tokens(workspace, public_id=public_id)
        if not found:
            raise ResourceUnavailable(
                f"token_id: no token {public_id} (see `kbmcp token list`)",
                details={"argument": "token_id", "value": token_id},
            )
        store.grants.revoke_token(conn, public_id, system_now_iso())
    return _token(workspace, public_id)


def count_usable_tokens(workspace: Workspace, principal: Principal) -> int:
    principal.require(ADMIN)
    return workspace.store.grants.count_usable_tokens(workspace.conn, system_now_iso())


def _check_scopes(scopes: Sequence[str]) -> list[str]:
    cleaned = [s.strip() for s in scopes] if not isinstance(scopes, str) else [scopes.strip()]
    if not cleaned:
        raise InvalidRequest(
            f"a token needs at least one scope: {', '.join(TOKEN_SCOPES)}",
            details={"argument": "scopes"},
        )
    unknown = [s for s in cleaned if s not in TOKEN_SCOPES]
    if unknown:
        raise InvalidRequest(
            f"scopes: unknown scope {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(TOKEN_SCOPES)}",
            details={"argument": "scopes", "values": unknown},
        )
    return [s for s in TOKEN_SCOPES if s in cleaned]


def _expiry(days: int | None) -> str | None:
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_EXPIRY_DAYS:
        raise InvalidRequest(
            f"expires_days must be a whole number of days from 1 to {MAX_EXPIRY_DAYS}, "
            f"got {days!r}",
            details={"argument": "expires_days", "value": days},
        )
    return format_timestamp(system_now() + timedelta(days=days))


def _allow_list(workspace: Workspace, tenant: TenantRef, refs: Sequence[str]) -> list[str] | None:
    """Public ids of the allow-list, each a knowledge base the tenant can read now (own or
    shared); None for no allow-list."""
    if not refs:
        return None
    if len(refs) > MAX_TOKEN_KBS:
        raise InvalidRequest(
            f"knowledge_bases accepts at most {MAX_TOKEN_KBS} items, got {len(refs)}",
            details={"argument": "knowledge_bases", "limit": MAX_TOKEN_KBS},
        )
    store, conn = workspace.store, workspace.conn
    readable = set(readable_kb_ids(store, conn, tenant_principal(tenant)))
    chosen: list[str] = []
    for ref in refs:
        found = store.catalog.find_knowledge_bases_by_ref(conn, ref.strip())
        candidates = [kb for kb in found if kb.id in readable]
        chosen.append(resolve_knowledge_base(candidates, ref, argument="knowledge_bases").public_id)
    return sorted(set(chosen))


def _token(workspace: Workspace, public_id: str) -> TokenInfo:
    return _tokens(workspace, public_id=public_id)[0]


def _tokens(
    workspace: Workspace, *, tenant_id: int | None = None, public_id: str | None = None
) -> list[TokenInfo]:
    moment = system_now_iso()
    rows = workspace.store.grants.tokens(workspace.conn, tenant_id=tenant_id, public_id=public_id)
    return [_token_of(row, moment) for row in rows]


def _token_of(row: TokenRow, moment: str) -> TokenInfo:
    expires, revoked = row.expires_at, row.revoked_at
    status = (
        "revoked"
        if revoked is not None
        else "expired"
        if expires is not None and expires <= moment
        else "active"
    )
    kb_ids = row.knowledge_base_ids
    return TokenInfo(
        row.public_id,
        row.tenant,
        row.name,
        json.loads(row.scopes),
        None if kb_ids is None else json.loads(kb_ids),
        row.created_at,
        expires,
        revoked,
        status,
    )
