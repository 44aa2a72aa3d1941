"""The grants concern (kbmcp/store/grants.py) on SQLite: readable sets, token lookup, shares,
tokens, and the listings of tenants and knowledge bases; the statements of `SqlGrants`."""

from __future__ import annotations

from kbmcp.store.grants import SqlGrants
from kbmcp.store.sqlite.dialect import SQLITE


class SqliteGrants(SqlGrants):
    dialect = SQLITE
    # Own knowledge bases plus those shared to the tenant and not revoked, narrowed by the token's
    # allow-list when it has one (`:allow_all` is 1 for "no allow-list"; an empty list allows
    # none); and the tenant's own memory stores, never shared and not limited by a token's
    # knowledge-base allow-list. One statement for both kinds (a search reads them twice), each
    # row with whether it is a memory store; a kind is read when its flag is 1.
    SELECT_READABLE_STORE_IDS = """
    SELECT kb.id, kb.kind = 'memories'
    FROM knowledge_base AS kb
    WHERE (:knowledge_bases AND kb.kind = 'documents'
           AND (kb.tenant_id = :tenant_id
                OR kb.id IN (SELECT s.knowledge_base_id FROM share AS s
                             WHERE s.tenant_id = :tenant_id AND s.revoked_at IS NULL))
           AND (:allow_all OR kb.public_id IN (SELECT value FROM json_each(:allowed))))
       OR (:memory_stores AND kb.kind = 'memories' AND kb.tenant_id = :tenant_id)
    ORDER BY kb.id
    """

    SELECT_TOKEN = """
    SELECT t.public_id, t.secret_hash, t.scopes, t.knowledge_base_ids, t.expires_at, t.revoked_at,
           ten.id, ten.public_id
    FROM token AS t JOIN tenant AS ten ON ten.id = t.tenant_id
    WHERE t.public_id = :public_id
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

    INSERT_TOKEN = """
    INSERT INTO token (public_id, tenant_id, name, secret_hash, scopes, knowledge_base_ids,
                       created_at, expires_at)
    VALUES (:public_id, :tenant_id, :name, :secret_hash, :scopes, :kb_ids, :now, :expires_at)
    """
    SELECT_TOKENS = """
    SELECT k.public_id, t.name, k.name, k.scopes, k.knowledge_base_ids, k.created_at, k.expires_at,
           k.revoked_at
    FROM token AS k JOIN tenant AS t ON t.id = k.tenant_id
    WHERE (:tenant_id IS NULL OR k.tenant_id = :tenant_id)
      AND (:public_id IS NULL OR k.public_id = :public_id)
    ORDER BY k.created_at, k.public_id
    """
    REVOKE_TOKEN = """
    UPDATE token SET revoked_at = :now WHERE public_id = :public_id AND revoked_at IS NULL
    """
    # Tokens that can still authenticate: `kbmcp serve --http` turns authentication on when any
    # exist.
    COUNT_USABLE_TOKENS = """
    SELECT count(*) FROM token
    WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now)
    """

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
                SELECT grantee.name
                FROM share AS s JOIN tenant AS grantee ON grantee.id = s.tenant_id
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


GRANTS = SqliteGrants()
