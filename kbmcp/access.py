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

import apsw

from kbmcp.clock import system_now_iso
from kbmcp.errors import Forbidden
from kbmcp.store.sqlite.catalog import LOCAL_TENANT, TenantRef, ensure_tenant
from kbmcp.store.sqlite.connection import write_transaction
from kbmcp.store.sqlite.id_key import id_key_of
from kbmcp.tokens import secret_matches, token_id_of

NO_ROW = 0  # SQLite row ids start at 1
KNOWLEDGE_READ = "knowledge:read"
KNOWLEDGE_WRITE = "knowledge:write"
MEMORY_READ = "memory:read"
MEMORY_WRITE = "memory:write"
# The scopes a token can carry, in display order.
TOKEN_SCOPES = (KNOWLEDGE_READ, KNOWLEDGE_WRITE, MEMORY_READ, MEMORY_WRITE)
# Managing the file (re-embedding, tenants, shares, tokens) is the local operator's alone: no
# token can carry this scope, so nothing reachable over the network administers the file.
ADMIN = "kbmcp:admin"
ALL_SCOPES = frozenset({*TOKEN_SCOPES, ADMIN})

# The names the service code checks (reading and writing documents).
READ = KNOWLEDGE_READ
WRITE = KNOWLEDGE_WRITE

# Own knowledge bases plus those shared to the tenant and not revoked, narrowed by the token's
# allow-list when it has one (`:allow_all` is 1 for "no allow-list"; an empty list allows none).
SELECT_READABLE_KB_IDS = """
SELECT kb.id
FROM knowledge_base AS kb
WHERE (kb.tenant_id = :tenant_id
       OR kb.id IN (SELECT s.knowledge_base_id FROM share AS s
                    WHERE s.tenant_id = :tenant_id AND s.revoked_at IS NULL))
  AND (:allow_all OR kb.public_id IN (SELECT value FROM json_each(:allowed)))
  AND kb.kind = 'documents'
ORDER BY kb.id
"""

# Memory stores are never shared and not limited by a token's knowledge-base allow-list: a
# tenant reads its own, when the principal has the memory:read scope.
SELECT_READABLE_MEMORY_STORE_IDS = """
SELECT kb.id FROM knowledge_base AS kb
WHERE kb.tenant_id = :tenant_id AND kb.kind = 'memories'
ORDER BY kb.id
"""

SELECT_TOKEN = """
SELECT t.public_id, t.secret_hash, t.scopes, t.knowledge_base_ids, t.expires_at, t.revoked_at,
       ten.id, ten.public_id
FROM token AS t JOIN tenant AS ten ON ten.id = t.tenant_id
WHERE t.public_id = :public_id
"""


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
    conn: apsw.Connection, writer_lock: AbstractContextManager[object]
) -> Principal:
    """The single local user who owns everything in a single-user file (recorded on first use,
    holding `writer_lock` for that write)."""
    tenant = _local_tenant(conn, writer_lock)
    return Principal(tenant_id=tenant.id, tenant_public_id=tenant.public_id)


def tenant_principal(tenant: TenantRef) -> Principal:
    """The operator acting as `tenant` (e.g. `kbmcp add --tenant T`): every token scope, no
    allow-list, but never ADMIN."""
    return Principal(tenant.id, tenant.public_id, scopes=frozenset(TOKEN_SCOPES))


def principal_for_secret(conn: apsw.Connection, secret: str) -> Principal | None:
    """The principal a token secret stands for, or None when it is malformed, unknown, expired or
    revoked. Looked up on every request, so a revocation takes effect on the next call."""
    token_id = token_id_of(secret)
    if token_id is None:
        return None
    row = conn.execute(SELECT_TOKEN, {"public_id": token_id}).fetchone()
    if row is None:
        return None
    public_id, stored_hash, scopes, kb_ids, expires_at, revoked_at, tenant_id, tenant_public = row
    if not secret_matches(secret, stored_hash):
        return None
    # Expiry is judged by the machine's clock, never by KBMCP_NOW (kbmcp/clock.py).
    if revoked_at is not None or (expires_at is not None and expires_at <= system_now_iso()):
        return None
    return Principal(
        tenant_id=tenant_id,
        tenant_public_id=tenant_public,
        scopes=frozenset(json.loads(scopes)) & frozenset(TOKEN_SCOPES),
        knowledge_base_allowlist=None if kb_ids is None else frozenset(json.loads(kb_ids)),
        token_id=public_id,
    )


def readable_kb_ids(conn: apsw.Connection, principal: Principal) -> list[int]:
    allowed = principal.knowledge_base_allowlist
    rows = conn.execute(
        SELECT_READABLE_KB_IDS,
        {
            "tenant_id": principal.tenant_id,
            "allow_all": allowed is None,
            "allowed": json.dumps(sorted(allowed or ())),
        },
    )
    return [row[0] for row in rows]


def readable_memory_store_ids(conn: apsw.Connection, principal: Principal) -> list[int]:
    """The memory stores the principal can read: its tenant's own, given memory:read."""
    if MEMORY_READ not in principal.scopes:
        return []
    rows = conn.execute(SELECT_READABLE_MEMORY_STORE_IDS, {"tenant_id": principal.tenant_id})
    return [row[0] for row in rows]


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


def readable(conn: apsw.Connection, principal: Principal) -> Readable:
    """Knowledge bases and memory stores the principal can read; at least one of the two read
    scopes is required (`Forbidden` names both)."""
    can_documents = KNOWLEDGE_READ in principal.scopes
    can_memories = MEMORY_READ in principal.scopes
    if not (can_documents or can_memories):
        raise Forbidden(
            f"this operation needs the '{KNOWLEDGE_READ}' or the '{MEMORY_READ}' scope",
            details={"required_scopes": [KNOWLEDGE_READ, MEMORY_READ]},
        )
    return Readable(
        readable_kb_ids(conn, principal) if can_documents else None,
        readable_memory_store_ids(conn, principal) if can_memories else None,
    )


def _local_tenant(conn: apsw.Connection, writer_lock: AbstractContextManager[object]) -> TenantRef:
    row = conn.execute(
        "SELECT id, public_id FROM tenant WHERE name = ?", (LOCAL_TENANT,)
    ).fetchone()
    if row is not None:
        return TenantRef(row[0], row[1])
    if conn.readonly("main"):
        # Nobody ever wrote to this file (or only another tenant did): the local owner owns
        # nothing in it, and a read-only file cannot record the owner. Row id 0 matches no row.
        return TenantRef(NO_ROW, id_key_of(conn).make("tenant", LOCAL_TENANT))
    with writer_lock, write_transaction(conn):
        return ensure_tenant(conn, LOCAL_TENANT)
