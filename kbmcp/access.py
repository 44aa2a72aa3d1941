"""Who is calling and what they may read.

Every service function takes a `Principal` and resolves the readable scope itself; callers never
pass tenant or owner filters. A principal is either the local owner (tenant 'local', every scope:
the CLI, stdio, and HTTP on loopback without tokens) or a token's tenant with the token's scopes
and optional knowledge-base allow-list. `readable_kb_ids` is the single place that decides which
knowledge bases a principal can read: the tenant's own, plus those shared to it and not revoked,
intersected with the token's allow-list. Every reader applies its result inside SQL.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbmcp.clock import system_now_iso
from kbmcp.errors import Forbidden
from kbmcp.scopes import (
    KNOWLEDGE_READ,
    KNOWLEDGE_WRITE,
    MEMORY_READ,
    MEMORY_WRITE,  # noqa: F401 (re-exported: the service code imports scopes from here)
    METRICS_READ,  # noqa: F401 (re-exported)
    TOKEN_SCOPES,
)
from kbmcp.store.catalog import LOCAL_TENANT, TenantRef
from kbmcp.tokens import secret_matches, token_id_of

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection, Store
    from kbmcp.store.grants import StoredToken

NO_ROW = 0  # row ids start at 1 (SQLite rowids, PostgreSQL identity columns)
# The scope names live in kbmcp/scopes.py (the command line offers them without this module).
# Managing the file (re-embedding, tenants, shares, tokens) is the local operator's alone: no
# token can carry this scope, so nothing reachable over the network administers the file.
ADMIN = "kbmcp:admin"
ALL_SCOPES = frozenset({*TOKEN_SCOPES, ADMIN})

# The names the service code checks (reading and writing documents).
READ = KNOWLEDGE_READ
WRITE = KNOWLEDGE_WRITE


@dataclass(frozen=True)
class Principal:
    tenant_id: int
    tenant_public_id: str
    scopes: frozenset[str] = ALL_SCOPES
    # Public ids of the knowledge bases a token is limited to; None means no limit.
    knowledge_base_allowlist: frozenset[str] | None = field(default=None)
    # The token this principal comes from (None: the local operator or a tenant acting locally).
    token_id: str | None = None

    def require(self, scope: str) -> None:
        if scope not in self.scopes:
            raise Forbidden(
                f"this operation needs the '{scope}' scope", details={"required_scope": scope}
            )


def local_principal(
    store: Store, conn: Connection, writer_lock: AbstractContextManager[object]
) -> Principal:
    """The single local user who owns everything in a single-user file (recorded on first use,
    holding `writer_lock` for that write)."""
    tenant = _local_tenant(store, conn, writer_lock)
    return Principal(tenant_id=tenant.id, tenant_public_id=tenant.public_id)


def operator_principal() -> Principal:
    """The local operator acting on the database as a whole (`kbmcp export`, `import`): ADMIN
    only, as no tenant (row id 0), so nothing is written on its behalf (not even the local
    owner's tenant row, which an import may bring with its own id)."""
    return Principal(tenant_id=NO_ROW, tenant_public_id="", scopes=frozenset({ADMIN}))


def tenant_principal(tenant: TenantRef) -> Principal:
    """The operator acting as `tenant` (e.g. `kbmcp add --tenant T`): every token scope, no
    allow-list, but never ADMIN."""
    return Principal(tenant.id, tenant.public_id, scopes=frozenset(TOKEN_SCOPES))


def principal_for_secret(store: Store, conn: Connection, secret: str) -> Principal | None:
    """The principal a token secret stands for, or None when it is malformed, unknown, expired or
    revoked. Looked up on every request, so a revocation takes effect on the next call (of any
    process or server on the same database)."""
    token_id = token_id_of(secret)
    if token_id is None:
        return None
    token = store.grants.stored_token(conn, token_id)
    if token is None or not secret_matches(secret, token.secret_hash):
        return None
    return _usable_principal(token)


def principal_for_token_id(store: Store, conn: Connection, token_id: str) -> Principal | None:
    """The principal of a token already verified once (an HTTP session's owner), or None once
    it is revoked, expired or gone: the same usability rule as `principal_for_secret`."""
    token = store.grants.stored_token(conn, token_id)
    return None if token is None else _usable_principal(token)


def _usable_principal(token: StoredToken) -> Principal | None:
    # Expiry is judged by the machine's clock, never by KBMCP_NOW (kbmcp/clock.py).
    expires_at = token.expires_at
    if token.revoked_at is not None or (expires_at is not None and expires_at <= system_now_iso()):
        return None
    kb_ids = token.knowledge_base_ids
    return Principal(
        tenant_id=token.tenant_id,
        tenant_public_id=token.tenant_public_id,
        scopes=frozenset(json.loads(token.scopes)) & frozenset(TOKEN_SCOPES),
        knowledge_base_allowlist=None if kb_ids is None else frozenset(json.loads(kb_ids)),
        token_id=token.public_id,
    )


def readable_kb_ids(store: Store, conn: Connection, principal: Principal) -> list[int]:
    """The knowledge bases (not memory stores) the principal can read: its tenant's own plus
    those shared to it and not revoked, narrowed by the token's allow-list when it has one."""
    return _store_ids(store, conn, principal, knowledge_bases=True, memory_stores=False)[0]


def readable_memory_store_ids(store: Store, conn: Connection, principal: Principal) -> list[int]:
    """The memory stores the principal can read: its tenant's own, given memory:read. Memory
    stores are never shared and not limited by a token's knowledge-base allow-list."""
    if MEMORY_READ not in principal.scopes:
        return []
    return _store_ids(store, conn, principal, knowledge_bases=False, memory_stores=True)[1]


def readable_ids(store: Store, conn: Connection, principal: Principal) -> frozenset[int]:
    """Every knowledge base and memory store the principal can read now, by row id (empty
    without a read scope): what an HTTP session's replayed events are checked against."""
    kb_ids, memory_store_ids = _store_ids(
        store,
        conn,
        principal,
        knowledge_bases=KNOWLEDGE_READ in principal.scopes,
        memory_stores=MEMORY_READ in principal.scopes,
    )
    return frozenset([*kb_ids, *memory_store_ids])


def _store_ids(
    store: Store,
    conn: Connection,
    principal: Principal,
    *,
    knowledge_bases: bool,
    memory_stores: bool,
) -> tuple[list[int], list[int]]:
    """(knowledge bases, memory stores) the principal can read, the kinds asked for, in one
    statement (a search reads its readable set twice: one round trip each on PostgreSQL)."""
    return store.grants.readable_store_ids(
        conn,
        principal.tenant_id,
        principal.knowledge_base_allowlist,
        knowledge_bases=knowledge_bases,
        memory_stores=memory_stores,
    )


@dataclass(frozen=True)
class Readable:
    """What a principal may read, by kind. A kind is `None` without its read scope (knowledge:
    read, memory:read); an empty list means the scope is there but nothing exists to read."""

    knowledge_base_ids: list[int] | None
    memory_store_ids: list[int] | None

    @property
    def all_ids(self) -> list[int]:
        """Knowledge bases and memory stores together (chunk fetch, reads by id)."""
        return [*(self.knowledge_base_ids or ()), *(self.memory_store_ids or ())]


def require_a_read_scope(principal: Principal) -> None:
    """`Forbidden` (naming both) unless the principal has at least one of the two read scopes:
    the check `readable` starts with, for callers that refuse before reading anything."""
    if KNOWLEDGE_READ not in principal.scopes and MEMORY_READ not in principal.scopes:
        raise Forbidden(
            f"this operation needs the '{KNOWLEDGE_READ}' or the '{MEMORY_READ}' scope",
            details={"required_scopes": [KNOWLEDGE_READ, MEMORY_READ]},
        )


def readable(store: Store, conn: Connection, principal: Principal) -> Readable:
    """Knowledge bases and memory stores the principal can read; at least one of the two read
    scopes is required (`Forbidden` names both)."""
    require_a_read_scope(principal)
    can_documents = KNOWLEDGE_READ in principal.scopes
    can_memories = MEMORY_READ in principal.scopes
    kb_ids, memory_store_ids = _store_ids(
        store, conn, principal, knowledge_bases=can_documents, memory_stores=can_memories
    )
    return Readable(kb_ids if can_documents else None, memory_store_ids if can_memories else None)


def _local_tenant(
    store: Store, conn: Connection, writer_lock: AbstractContextManager[object]
) -> TenantRef:
    found = store.catalog.find_tenant(conn, LOCAL_TENANT)
    if found is not None:
        return found
    if store.is_read_only(conn):
        # Nobody ever wrote to this file (or only another tenant did): the local owner owns
        # nothing in it, and a read-only file cannot record the owner. Row id 0 matches no row.
        return TenantRef(NO_ROW, store.id_key.id_key_of(conn).make("tenant", LOCAL_TENANT))
    with writer_lock, store.write_transaction(conn):
        return store.catalog.ensure_tenant(conn, LOCAL_TENANT)
