"""The grants concern (kbmcp/store/grants.py) on PostgreSQL: readable sets, token lookup,
shares, tokens, and the listings of tenants and knowledge bases; the statements of `SqlGrants`.

SQLite's statements (kbmcp/store/sqlite/grants.py) with: lists as arrays (`= ANY(...)`, a
JSON array of grantees as `array_agg`), typed NULL tests on optional parameters (PostgreSQL
must know a parameter's type), and `COLLATE "C"` wherever text is ordered or compared (names in
byte order, ISO timestamps compared as SQLite compares them), whatever the database's collation.
"""

from __future__ import annotations

from kbmcp.store.grants import SqlGrants
from kbmcp.store.postgres.dialect import POSTGRES


class PostgresGrants(SqlGrants):
    dialect = POSTGRES
    SELECT_READABLE_STORE_IDS = """
    SELECT kb.id, kb.kind = 'memories'
    FROM knowledge_base AS kb
    WHERE (%(knowledge_bases)s::boolean AND kb.kind = 'documents'
           AND (kb.tenant_id = %(tenant_id)s
                OR kb.id IN (SELECT s.knowledge_base_id FROM share AS s
                             WHERE s.tenant_id = %(tenant_id)s AND s.revoked_at IS NULL))
           AND (%(allow_all)s::boolean OR kb.public_id = ANY(%(allowed)s::text[])))
       OR (%(memory_stores)s::boolean AND kb.kind = 'memories'
           AND kb.tenant_id = %(tenant_id)s)
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


GRANTS = PostgresGrants()
