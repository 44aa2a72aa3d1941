"""The grants concern (kbmcp/store/grants.py) on PostgreSQL: readable sets, token lookup,
shares, tokens, and the listings of tenants and knowledge bases.

SQLite's statements (kbmcp/store/sqlite/grants.py) with: lists as arrays (`= ANY(...)`, a
JSON array of grantees as `array_agg`), typed NULL tests on optional parameters (PostgreSQL
must know a parameter's type), and `COLLATE "C"` wherever text is ordered or compared (names in
byte order, ISO timestamps compared as SQLite compares them), whatever the database's collation.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import psycopg

from kbmcp.store.grants import KnowledgeBaseRow, NewToken, StoredToken, TenantRow, TokenRow

PgConnection = psycopg.Connection[Any]

SELECT_READABLE_KB_IDS = """
SELECT kb.id
FROM knowledge_base AS kb
WHERE (kb.tenant_id = %(tenant_id)s
       OR kb.id IN (SELECT s.knowledge_base_id FROM share AS s
                    WHERE s.tenant_id = %(tenant_id)s AND s.revoked_at IS NULL))
  AND (%(allow_all)s::boolean OR kb.public_id = ANY(%(allowed)s::text[]))
  AND kb.kind = 'documents'
ORDER BY kb.id
"""
SELECT_READABLE_MEMORY_STORE_IDS = """
SELECT kb.id FROM knowledge_base AS kb
WHERE kb.tenant_id = %(tenant_id)s AND kb.kind = 'memories'
ORDER BY kb.id
"""
SELECT_TOKEN = """
SELECT t.public_id, t.secret_hash, t.scopes, t.knowledge_base_ids, t.expires_at, t.revoked_at,
       ten.id, ten.public_id
FROM token AS t JOIN tenant AS ten ON ten.id = t.tenant_id
WHERE t.public_id = %(public_id)s
"""

SELECT_SHARE_IN_FORCE = """
SELECT revoked_at IS NULL FROM share
WHERE knowledge_base_id = %(kb_id)s AND tenant_id = %(tenant_id)s
"""
UPSERT_SHARE = """
INSERT INTO share (knowledge_base_id, tenant_id, shared_at)
VALUES (%(kb_id)s, %(tenant_id)s, %(now)s)
ON CONFLICT (knowledge_base_id, tenant_id) DO UPDATE SET shared_at = %(now)s, revoked_at = NULL
"""
REVOKE_SHARE = """
UPDATE share SET revoked_at = %(now)s
WHERE knowledge_base_id = %(kb_id)s AND tenant_id = %(tenant_id)s AND revoked_at IS NULL
"""

INSERT_TOKEN = """
INSERT INTO token (public_id, tenant_id, name, secret_hash, scopes, knowledge_base_ids,
                   created_at, expires_at)
VALUES (%(public_id)s, %(tenant_id)s, %(name)s, %(secret_hash)s, %(scopes)s, %(kb_ids)s,
        %(now)s, %(expires_at)s)
"""
SELECT_TOKENS = """
SELECT k.public_id, t.name, k.name, k.scopes, k.knowledge_base_ids, k.created_at, k.expires_at,
       k.revoked_at
FROM token AS k JOIN tenant AS t ON t.id = k.tenant_id
WHERE (%(tenant_id)s::bigint IS NULL OR k.tenant_id = %(tenant_id)s)
  AND (%(public_id)s::text IS NULL OR k.public_id = %(public_id)s)
ORDER BY k.created_at COLLATE "C", k.public_id COLLATE "C"
"""
REVOKE_TOKEN = """
UPDATE token SET revoked_at = %(now)s WHERE public_id = %(public_id)s AND revoked_at IS NULL
"""
COUNT_USABLE_TOKENS = """
SELECT count(*) FROM token
WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at COLLATE "C" > %(now)s)
"""

SELECT_TENANTS = """
SELECT t.public_id, t.name, t.created_at,
       (SELECT count(*) FROM knowledge_base AS kb
        WHERE kb.tenant_id = t.id AND kb.kind = 'documents'),
       (SELECT count(*) FROM token AS k
        WHERE k.tenant_id = t.id AND k.revoked_at IS NULL
          AND (k.expires_at IS NULL OR k.expires_at COLLATE "C" > %(now)s))
FROM tenant AS t
ORDER BY t.name COLLATE "C"
"""
SELECT_KNOWLEDGE_BASES = """
SELECT kb.public_id, kb.name, kb.description, owner.public_id, owner.name, kb.created_at,
       ARRAY(SELECT grantee.name
             FROM share AS s JOIN tenant AS grantee ON grantee.id = s.tenant_id
             WHERE s.knowledge_base_id = kb.id AND s.revoked_at IS NULL
             ORDER BY grantee.name COLLATE "C")
FROM knowledge_base AS kb JOIN tenant AS owner ON owner.id = kb.tenant_id
WHERE kb.kind = 'documents'
  AND (%(tenant_id)s::bigint IS NULL
       OR kb.tenant_id = %(tenant_id)s
       OR kb.id IN (SELECT knowledge_base_id FROM share
                    WHERE tenant_id = %(tenant_id)s AND revoked_at IS NULL))
ORDER BY owner.name COLLATE "C", kb.name COLLATE "C"
"""


# ------------------------------------------------------------------ reading rights


def readable_knowledge_base_ids(
    conn: PgConnection, tenant_id: int, allowlist: Collection[str] | None
) -> list[int]:
    rows = conn.execute(
        SELECT_READABLE_KB_IDS,
        {
            "tenant_id": tenant_id,
            "allow_all": allowlist is None,
            "allowed": sorted(allowlist or ()),
        },
    )
    return [row[0] for row in rows]


def memory_store_ids(conn: PgConnection, tenant_id: int) -> list[int]:
    rows = conn.execute(SELECT_READABLE_MEMORY_STORE_IDS, {"tenant_id": tenant_id})
    return [row[0] for row in rows]


def stored_token(conn: PgConnection, public_id: str) -> StoredToken | None:
    row = conn.execute(SELECT_TOKEN, {"public_id": public_id}).fetchone()
    return None if row is None else StoredToken(*row)


# ------------------------------------------------------------------ shares


def share_in_force(conn: PgConnection, knowledge_base_id: int, tenant_id: int) -> bool:
    row = conn.execute(
        SELECT_SHARE_IN_FORCE, {"kb_id": knowledge_base_id, "tenant_id": tenant_id}
    ).fetchone()
    return bool(row and row[0])


def share(conn: PgConnection, knowledge_base_id: int, tenant_id: int, now: str) -> None:
    conn.execute(UPSERT_SHARE, {"kb_id": knowledge_base_id, "tenant_id": tenant_id, "now": now})


def revoke_share(conn: PgConnection, knowledge_base_id: int, tenant_id: int, now: str) -> None:
    conn.execute(REVOKE_SHARE, {"kb_id": knowledge_base_id, "tenant_id": tenant_id, "now": now})


# ------------------------------------------------------------------ tokens


def insert_token(conn: PgConnection, token: NewToken, now: str) -> None:
    conn.execute(
        INSERT_TOKEN,
        {
            "public_id": token.public_id,
            "tenant_id": token.tenant_id,
            "name": token.name,
            "secret_hash": token.secret_hash,
            "scopes": token.scopes,
            "kb_ids": token.knowledge_base_ids,
            "now": now,
            "expires_at": token.expires_at,
        },
    )


def tokens(
    conn: PgConnection, *, tenant_id: int | None = None, public_id: str | None = None
) -> list[TokenRow]:
    return [
        TokenRow(*row)
        for row in conn.execute(SELECT_TOKENS, {"tenant_id": tenant_id, "public_id": public_id})
    ]


def revoke_token(conn: PgConnection, public_id: str, now: str) -> None:
    conn.execute(REVOKE_TOKEN, {"public_id": public_id, "now": now})


def count_usable_tokens(conn: PgConnection, now: str) -> int:
    return int(conn.execute(COUNT_USABLE_TOKENS, {"now": now}).fetchone()[0])


# ------------------------------------------------------------------ listings


def tenants(conn: PgConnection, now: str) -> list[TenantRow]:
    return [TenantRow(*row) for row in conn.execute(SELECT_TENANTS, {"now": now})]


def knowledge_bases(conn: PgConnection, tenant_id: int | None) -> list[KnowledgeBaseRow]:
    return [
        KnowledgeBaseRow(*row)
        for row in conn.execute(SELECT_KNOWLEDGE_BASES, {"tenant_id": tenant_id})
    ]
