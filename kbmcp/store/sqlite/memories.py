"""The reads of memories on SQLite (the contract: kbmcp/store/memories.py): the statements of
`SqlMemories`."""

from __future__ import annotations

from kbmcp.store.memories import SqlMemories
from kbmcp.store.sqlite.dialect import SQLITE


class SqliteMemories(SqlMemories):
    dialect = SQLITE

    # A write transaction (BEGIN IMMEDIATE) is the only writer of the file.
    LOCK_TENANT = None
    SELECT_STORES = """
    SELECT s.id, s.public_id, s.name, s.tags, s.created_at,
           (SELECT count(*) FROM document AS m
            WHERE m.knowledge_base_id = s.id AND m.status = 'published')
    FROM knowledge_base AS s
    WHERE s.tenant_id = :tenant_id AND s.kind = 'memories'
    ORDER BY s.name
    """

    # A memory of the store with this content as its current text, forgotten or not. The columns
    # are a `MemoryState`, as are SELECT_MEMORY_STATE's. Two memories hold one text only when a
    # caller without memory:read revised one into the other's text (kbmcp/service/memories.py):
    # the published one, then the oldest, answers.
    SELECT_SAME_CONTENT = """
    SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
           (SELECT json_group_array(json_array(t.key, t.value))
            FROM document_tag AS t WHERE t.document_id = m.id)
    FROM revision AS r
    JOIN document AS m ON m.current_revision_id = r.id
    WHERE r.content_hash = :content_hash AND m.knowledge_base_id = :store_id
    ORDER BY m.status <> 'published', m.id
    LIMIT 1
    """
    # A memory of the tenant's stores by public id (to revise it), with its store.
    SELECT_MEMORY_STATE = """
    SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
           (SELECT json_group_array(json_array(t.key, t.value))
            FROM document_tag AS t WHERE t.document_id = m.id),
           s.id, s.public_id, s.name
    FROM document AS m
    JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
    LEFT JOIN revision AS r ON r.id = m.current_revision_id
    WHERE m.public_id = :memory_id AND s.tenant_id = :tenant_id AND s.kind = 'memories'
    """

    # A memory of one of the tenant's stores, by public id.
    SELECT_OWN_MEMORY = """
    SELECT m.id, m.public_id, m.status, s.public_id, m.updated_at, r.public_id
    FROM document AS m
    JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
    LEFT JOIN revision AS r ON r.id = m.current_revision_id
    WHERE m.public_id = :memory_id AND s.tenant_id = :tenant_id AND s.kind = 'memories'
    """

    SELECT_MEMORIES = """
    SELECT m.public_id, s.public_id, s.name, m.status, r.content, m.source, m.created_at,
           m.updated_at, r.public_id, r.number,
           (SELECT json_group_array(json_array(t.key, t.value))
            FROM (SELECT key, value FROM document_tag
                  WHERE document_id = m.id ORDER BY key, value) AS t)
    FROM document AS m
    JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
    JOIN revision AS r ON r.id = m.current_revision_id
    WHERE s.tenant_id = :tenant_id AND s.kind = 'memories'
      AND (:store_id IS NULL OR s.id = :store_id)
      AND (:include_forgotten OR m.status = 'published')
    ORDER BY m.updated_at DESC, m.public_id
    LIMIT :limit
    """


MEMORIES = SqliteMemories()
