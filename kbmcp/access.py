"""Who is calling and what they may read.

Every service function takes a `Principal` and resolves the readable scope itself; callers never
pass tenant or owner filters. Today there is one principal, the local user (tenant 'local', every
scope). Tokens, shares and per-token knowledge-base allow-lists plug in here: `readable_kb_ids`
is the single place that decides which knowledge bases a principal can read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import apsw

from kbmcp.errors import Forbidden
from kbmcp.store.catalog import LOCAL_TENANT, TenantRef, ensure_tenant
from kbmcp.store.connection import write_transaction

READ = "kb:read"
WRITE = "kb:write"
ADMIN = "kb:admin"
ALL_SCOPES = frozenset({READ, WRITE, ADMIN})

# Knowledge bases the principal's tenant owns, narrowed by the token's allow-list when it has one.
# (Shares to the tenant will be UNIONed in here.)
SELECT_READABLE_KB_IDS = """
SELECT kb.id
FROM knowledge_base AS kb
WHERE kb.tenant_id = :tenant_id
  AND (:allow_all OR kb.public_id IN (SELECT value FROM json_each(:allowed)))
ORDER BY kb.id
"""


@dataclass(frozen=True)
class Principal:
    tenant_id: int
    tenant_public_id: str
    scopes: frozenset[str] = ALL_SCOPES
    # Public ids of the knowledge bases a token is limited to; None means no limit.
    knowledge_base_allowlist: frozenset[str] | None = field(default=None)

    def require(self, scope: str) -> None:
        if scope not in self.scopes:
            raise Forbidden(
                f"this operation needs the '{scope}' scope", details={"required_scope": scope}
            )


def local_principal(conn: apsw.Connection) -> Principal:
    """The single local user who owns everything in a single-user file."""
    tenant = _local_tenant(conn)
    return Principal(tenant_id=tenant.id, tenant_public_id=tenant.public_id)


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


def _local_tenant(conn: apsw.Connection) -> TenantRef:
    row = conn.execute(
        "SELECT id, public_id FROM tenant WHERE name = ?", (LOCAL_TENANT,)
    ).fetchone()
    if row is not None:
        return TenantRef(row[0], row[1])
    with write_transaction(conn):
        return ensure_tenant(conn, LOCAL_TENANT)
