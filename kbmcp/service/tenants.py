"""Tenants, the knowledge bases they own, and shares of knowledge bases to other tenants.

Administration of the file: every function needs the ADMIN scope, which only the local operator
holds (the CLI), never a token. Tenants and knowledge bases are named by name or by public id; a
knowledge-base name that several tenants use is an error listing the ids to choose from.
A share is read-only and takes effect on the grantee's next call (nothing is cached).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from kbmcp.access import ADMIN, Principal, tenant_principal
from kbmcp.clock import now_iso, system_now_iso
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.store.sqlite import catalog
from kbmcp.store.sqlite.catalog import NamedTenant, OwnedKnowledgeBase
from kbmcp.store.sqlite.connection import write_transaction
from kbmcp.validate import collection_name
from kbmcp.workspace import Workspace, holding_lock

TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

SELECT_TENANTS = """
SELECT t.public_id, t.name, t.created_at,
       (SELECT count(*) FROM knowledge_base AS kb
        WHERE kb.tenant_id = t.id AND kb.kind = 'documents'),
       (SELECT count(*) FROM token AS k
        WHERE k.tenant_id = t.id AND k.revoked_at IS NULL
          AND (k.expires_at IS NULL OR k.expires_at > :now))
FROM tenant AS t
ORDER BY t.name
"""

# Every knowledge base with its owner and the tenants it is shared to (shares in force only).
# With :tenant_id, only what that tenant can read: its own plus those shared to it.
SELECT_KNOWLEDGE_BASES = """
SELECT kb.public_id, kb.name, kb.description, owner.public_id, owner.name, kb.created_at,
       (SELECT json_group_array(g.name) FROM (
            SELECT grantee.name FROM share AS s JOIN tenant AS grantee ON grantee.id = s.tenant_id
            WHERE s.knowledge_base_id = kb.id AND s.revoked_at IS NULL
            ORDER BY grantee.name) AS g)
FROM knowledge_base AS kb JOIN tenant AS owner ON owner.id = kb.tenant_id
WHERE kb.kind = 'documents'
  AND (:tenant_id IS NULL
       OR kb.tenant_id = :tenant_id
       OR kb.id IN (SELECT knowledge_base_id FROM share
                    WHERE tenant_id = :tenant_id AND revoked_at IS NULL))
ORDER BY owner.name, kb.name
"""

SELECT_SHARE_IN_FORCE = """
SELECT revoked_at IS NULL FROM share WHERE knowledge_base_id = :kb_id AND tenant_id = :tenant_id
"""
# Sharing again after an unshare re-activates the row with a new date.
UPSERT_SHARE = """
INSERT INTO share (knowledge_base_id, tenant_id, shared_at) VALUES (:kb_id, :tenant_id, :now)
ON CONFLICT (knowledge_base_id, tenant_id) DO UPDATE SET shared_at = :now, revoked_at = NULL
"""
REVOKE_SHARE = """
UPDATE share SET revoked_at = :now
WHERE knowledge_base_id = :kb_id AND tenant_id = :tenant_id AND revoked_at IS NULL
"""


@dataclass(frozen=True)
class TenantInfo:
    tenant_id: str
    name: str
    created_at: str
    knowledge_base_count: int
    active_token_count: int


@dataclass(frozen=True)
class KnowledgeBaseRecord:
    knowledge_base_id: str
    name: str
    description: str
    owner_tenant_id: str
    owner: str
    created_at: str
    shared_with: list[str]


@dataclass(frozen=True)
class ShareInfo:
    knowledge_base_id: str
    knowledge_base: str
    owner: str
    tenant: str
    shared: bool
    changed: bool


# ------------------------------------------------------------------ tenants


@holding_lock
def create_tenant(workspace: Workspace, principal: Principal, name: str) -> TenantInfo:
    principal.require(ADMIN)
    clean = name.strip() if isinstance(name, str) else ""
    if not TENANT_NAME.match(clean):
        raise InvalidRequest(
            f"tenant name {name!r} is not valid: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            details={"argument": "name", "value": name},
        )
    conn = workspace.conn
    with write_transaction(conn):
        if catalog.find_tenant_by_ref(conn, clean) is not None:
            raise InvalidRequest(
                f"a tenant named {clean!r} already exists", details={"argument": "name"}
            )
        catalog.ensure_tenant(conn, clean)
    return _tenant_info(workspace, clean)


def list_tenants(workspace: Workspace, principal: Principal) -> list[TenantInfo]:
    principal.require(ADMIN)
    return [
        TenantInfo(*row)
        for row in workspace.conn.execute(SELECT_TENANTS, {"now": system_now_iso()})
    ]


def _tenant_info(workspace: Workspace, name: str) -> TenantInfo:
    return next(
        TenantInfo(*row)
        for row in workspace.conn.execute(SELECT_TENANTS, {"now": system_now_iso()})
        if row[1] == name
    )


@holding_lock
def act_as_tenant(workspace: Workspace, principal: Principal, ref: str) -> Principal:
    """The operator acting as tenant `ref` (e.g. to add documents to its knowledge bases)."""
    principal.require(ADMIN)
    return tenant_principal(tenant_named(workspace, ref, "tenant").ref)


def tenant_named(workspace: Workspace, ref: str, argument: str) -> NamedTenant:
    """The tenant named (or with public id) `ref`, for callers already holding the lock."""
    found = catalog.find_tenant_by_ref(workspace.conn, ref.strip())
    if found is None:
        raise ResourceUnavailable(
            f"{argument}: no tenant named {ref!r} (see `kbmcp tenant list`)",
            details={"argument": argument, "value": ref},
        )
    return found


# ------------------------------------------------------------------ knowledge bases


@holding_lock
def create_knowledge_base(
    workspace: Workspace, principal: Principal, name: str, *, tenant: str, description: str = ""
) -> KnowledgeBaseRecord:
    principal.require(ADMIN)
    clean = collection_name(name, "knowledge base")
    conn = workspace.conn
    owner = tenant_named(workspace, tenant, "tenant")
    with write_transaction(conn):
        if catalog.find_knowledge_base(conn, owner.ref, clean) is not None:
            raise InvalidRequest(
                f"tenant {owner.name!r} already has a knowledge base or memory store named "
                f"{clean!r}",
                details={"argument": "name", "value": clean},
            )
        created = catalog.ensure_knowledge_base(conn, owner.ref, clean, description)
    return next(kb for kb in _records(workspace, None) if kb.knowledge_base_id == created.public_id)


def list_knowledge_base_records(
    workspace: Workspace, principal: Principal, *, tenant: str | None = None
) -> list[KnowledgeBaseRecord]:
    """Every knowledge base with owner and grantees; with `tenant`, those it can read."""
    principal.require(ADMIN)
    tenant_id = None if tenant is None else tenant_named(workspace, tenant, "tenant").id
    return _records(workspace, tenant_id)


def _records(workspace: Workspace, tenant_id: int | None) -> list[KnowledgeBaseRecord]:
    return [
        KnowledgeBaseRecord(kb_id, name, desc, owner_id, owner, created, json.loads(shared))
        for kb_id, name, desc, owner_id, owner, created, shared in workspace.conn.execute(
            SELECT_KNOWLEDGE_BASES, {"tenant_id": tenant_id}
        )
    ]


def resolve_knowledge_base(
    candidates: list[OwnedKnowledgeBase], ref: str, *, argument: str
) -> OwnedKnowledgeBase:
    """The one knowledge base `ref` names among `candidates`; none or several is an error."""
    if not candidates:
        raise ResourceUnavailable(
            f"{argument}: no knowledge base named or with id {ref!r}",
            details={"argument": argument, "value": ref},
        )
    if len(candidates) > 1:
        choices = ", ".join(f"{kb.public_id} (owner {kb.owner.name})" for kb in candidates)
        raise InvalidRequest(
            f"{argument}: several knowledge bases are named {ref!r}; pass an id: {choices}",
            details={"argument": argument, "ids": [kb.public_id for kb in candidates]},
        )
    return candidates[0]


# ------------------------------------------------------------------ shares


@holding_lock
def share_knowledge_base(
    workspace: Workspace, principal: Principal, knowledge_base: str, *, tenant: str
) -> ShareInfo:
    """Grant `tenant` read access to `knowledge_base` (idempotent)."""
    return _set_share(workspace, principal, knowledge_base, tenant, shared=True)


@holding_lock
def unshare_knowledge_base(
    workspace: Workspace, principal: Principal, knowledge_base: str, *, tenant: str
) -> ShareInfo:
    """End `tenant`'s access to `knowledge_base`: gone from its next call (idempotent)."""
    return _set_share(workspace, principal, knowledge_base, tenant, shared=False)


def _set_share(
    workspace: Workspace, principal: Principal, kb_ref: str, tenant_ref: str, *, shared: bool
) -> ShareInfo:
    principal.require(ADMIN)
    conn = workspace.conn
    kb = resolve_knowledge_base(
        catalog.find_knowledge_bases_by_ref(conn, kb_ref.strip()), kb_ref, argument="knowledge_base"
    )
    grantee = tenant_named(workspace, tenant_ref, "tenant")
    if grantee.id == kb.owner.id:
        raise InvalidRequest(
            f"tenant {grantee.name!r} owns {kb.name!r}; share it with another tenant",
            details={"argument": "tenant", "value": tenant_ref},
        )
    params = {"kb_id": kb.id, "tenant_id": grantee.id, "now": now_iso()}
    with write_transaction(conn):
        row = conn.execute(SELECT_SHARE_IN_FORCE, params).fetchone()
        changed = bool(row and row[0]) != shared
        if changed:
            conn.execute(UPSERT_SHARE if shared else REVOKE_SHARE, params)
    return ShareInfo(kb.public_id, kb.name, kb.owner.name, grantee.name, shared, changed)
