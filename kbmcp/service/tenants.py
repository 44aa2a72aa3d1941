"""Tenants, the knowledge bases they own, and shares of knowledge bases to other tenants.

Administration of the file: every function needs the ADMIN scope, which only the local operator
holds (the CLI), never a token. Tenants and knowledge bases are named by name or by public id; a
knowledge-base name that several tenants use is an error listing the ids to choose from.
A share is read-only and takes effect on the grantee's next call (nothing is cached).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbmcp.access import ADMIN, Principal, tenant_principal
from kbmcp.clock import now_iso, system_now_iso
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.store.catalog import NamedTenant, OwnedKnowledgeBase
from kbmcp.store.grants import KnowledgeBaseRow, TenantRow
from kbmcp.validate import collection_name
from kbmcp.workspace import Workspace, holding_lock

TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


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
    store, conn = workspace.store, workspace.conn
    with store.write_transaction(conn):
        if store.catalog.find_tenant_by_ref(conn, clean) is not None:
            raise InvalidRequest(
                f"a tenant named {clean!r} already exists", details={"argument": "name"}
            )
        store.catalog.ensure_tenant(conn, clean)
    return next(info for info in _tenants(workspace) if info.name == clean)


def list_tenants(workspace: Workspace, principal: Principal) -> list[TenantInfo]:
    principal.require(ADMIN)
    return _tenants(workspace)


def _tenants(workspace: Workspace) -> list[TenantInfo]:
    rows = workspace.store.grants.tenants(workspace.conn, system_now_iso())
    return [_tenant_of(row) for row in rows]


def _tenant_of(row: TenantRow) -> TenantInfo:
    return TenantInfo(
        row.public_id, row.name, row.created_at, row.knowledge_base_count, row.active_token_count
    )


@holding_lock
def act_as_tenant(workspace: Workspace, principal: Principal, ref: str) -> Principal:
    """The operator acting as tenant `ref` (e.g. to add documents to its knowledge bases)."""
    principal.require(ADMIN)
    return tenant_principal(tenant_named(workspace, ref, "tenant").ref)


def tenant_named(workspace: Workspace, ref: str, argument: str) -> NamedTenant:
    """The tenant named (or with public id) `ref`, for callers already holding the lock."""
    found = workspace.store.catalog.find_tenant_by_ref(workspace.conn, ref.strip())
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
    store, conn = workspace.store, workspace.conn
    owner = tenant_named(workspace, tenant, "tenant")
    with store.write_transaction(conn):
        if store.catalog.find_knowledge_base(conn, owner.ref, clean) is not None:
            raise InvalidRequest(
                f"tenant {owner.name!r} already has a knowledge base or memory store named "
                f"{clean!r}",
                details={"argument": "name", "value": clean},
            )
        created = store.catalog.ensure_knowledge_base(conn, owner.ref, clean, description)
    return next(kb for kb in _records(workspace, None) if kb.knowledge_base_id == created.public_id)


def list_knowledge_base_records(
    workspace: Workspace, principal: Principal, *, tenant: str | None = None
) -> list[KnowledgeBaseRecord]:
    """Every knowledge base with owner and grantees; with `tenant`, those it can read."""
    principal.require(ADMIN)
    tenant_id = None if tenant is None else tenant_named(workspace, tenant, "tenant").id
    return _records(workspace, tenant_id)


def _records(workspace: Workspace, tenant_id: int | None) -> list[KnowledgeBaseRecord]:
    rows = workspace.store.grants.knowledge_bases(workspace.conn, tenant_id)
    return [_record_of(row) for row in rows]


def _record_of(row: KnowledgeBaseRow) -> KnowledgeBaseRecord:
    return KnowledgeBaseRecord(
        row.public_id,
        row.name,
        row.description,
        row.owner_public_id,
        row.owner,
        row.created_at,
        row.shared_with,
    )


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
    store, conn = workspace.store, workspace.conn
    kb = resolve_knowledge_base(
        store.catalog.find_knowledge_bases_by_ref(conn, kb_ref.strip()),
        kb_ref,
        argument="knowledge_base",
    )
    grantee = tenant_named(workspace, tenant_ref, "tenant")
    if grantee.id == kb.owner.id:
        raise InvalidRequest(
            f"tenant {grantee.name!r} owns {kb.name!r}; share it with another tenant",
            details={"argument": "tenant", "value": tenant_ref},
        )
    now = now_iso()
    with store.write_transaction(conn):
        changed = store.grants.share_in_force(conn, kb.id, grantee.id) != shared
        if changed:
            change = store.grants.share if shared else store.grants.revoke_share
            change(conn, kb.id, grantee.id, now)
    return ShareInfo(kb.public_id, kb.name, kb.owner.name, grantee.name, shared, changed)
