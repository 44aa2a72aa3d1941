"""The reads of memories on PostgreSQL (the contract: kbmcp/store/memories.py): SQLite's
statements with tags as arrays of pairs and names, timestamps and public ids ordered as bytes
(`COLLATE "C"`, SQLite's BINARY), under `SqlMemories`."""

from __future__ import annotations

from kbmcp.store.memories import SqlMemories
from kbmcp.store.postgres.dialect import POSTGRES


class PostgresMemories(SqlMemories):
    dialect = POSTGRES

    # The count is a per-store aggregate joined to the stores (see listing.py's
    # SELECT_KNOWLEDGE_BASES: Citus plans it on the shards).
    SELECT_STORES = """
    SELECT s.id, s.public_id, s.name, s.tags, s.created_at, coalesce(m.memories, 0)
    FROM knowledge_base AS s
    LEFT JOIN (SELECT m.knowledge_base_id, count(*) AS memories
               FROM document AS m
               WHERE m.status = 'published'
                 AND m.knowledge_base_id IN (SELECT id FROM knowledge_base
                                             WHERE tenant_id = %(tenant_id)s
                                               AND kind = 'memories')
               GROUP BY m.knowledge_base_id) AS m ON m.knowledge_base_id = s.id
    WHERE s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
    ORDER BY s.name COLLATE "C"
    """
    # Several servers write one database: a store's name is checked free and then inserted, so two
    # transactions creating a store of one tenant take turns on the tenant's row. NO KEY UPDATE: it
    # does not block the foreign-key checks (KEY SHARE) of other inserts for the tenant.
    LOCK_TENANT = "SELECT 1 FROM tenant WHERE id = %(tenant_id)s FOR NO KEY UPDATE"

    # A memory of the store with this content as its current text, forgotten or not. Two memories
    # hold one text only when a caller without memory:read revised one into the other's text
    # (kbmcp/service/memories.py): the published one, then the oldest, answers.
    SELECT_SAME_CONTENT = """
    SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
           ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t
                 WHERE t.knowledge_base_id = m.knowledge_base_id AND t.document_id = m.id)
    FROM revision AS r
    JOIN document AS m ON m.knowledge_base_id = r.knowledge_base_id AND m.current_revision_id = r.id
    WHERE r.content_hash = %(content_hash)s AND r.knowledge_base_id = %(store_id)s
    ORDER BY m.status <> 'published', m.id
    LIMIT 1
    """
    SELECT_MEMORY_STATE = """
    SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
           ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t
                 WHERE t.knowledge_base_id = m.knowledge_base_id AND t.document_id = m.id),
           s.id, s.public_id, s.name
    FROM document AS m
    JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
    LEFT JOIN revision AS r
           ON r.knowledge_base_id = m.knowledge_base_id AND r.id = m.current_revision_id
    WHERE m.public_id = %(memory_id)s AND s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
    """
    SELECT_OWN_MEMORY = """
    SELECT m.id, m.public_id, m.status, s.public_id, m.updated_at, r.public_id
    FROM document AS m
    JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
    LEFT JOIN revision AS r
           ON r.knowledge_base_id = m.knowledge_base_id AND r.id = m.current_revision_id
    WHERE m.public_id = %(memory_id)s AND s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
    """
    # Trap: a parameter only compared with NULL has no type PostgreSQL can infer: `::bigint`.
    SELECT_MEMORIES = """
    SELECT m.public_id, s.public_id, s.name, m.status, r.content, m.source, m.created_at,
           m.updated_at, r.public_id, r.number,
           ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t
                 WHERE t.knowledge_base_id = m.knowledge_base_id AND t.document_id = m.id
                 ORDER BY t.key COLLATE "C", t.value COLLATE "C")
    FROM document AS m
    JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
    JOIN revision AS r
      ON r.knowledge_base_id = m.knowledge_base_id AND r.id = m.current_revision_id
    WHERE s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
      AND (%(store_id)s::bigint IS NULL OR s.id = %(store_id)s)
      AND (%(include_forgotten)s OR m.status = 'published')
    ORDER BY m.updated_at COLLATE "C" DESC, m.public_id COLLATE "C"
    LIMIT %(limit)s
    """


MEMORIES = PostgresMemories()
