"""The reads of memories on SQLite (the contract: kbmcp/store/memories.py)."""

from __future__ import annotations

import json

import apsw

from kbmcp.store.memories import MemoryRow, MemoryState, OwnMemory, RevisableMemory, StoreRow

SELECT_STORES = """
SELECT s.id, s.public_id, s.name, s.tags, s.created_at,
       (SELECT count(*) FROM document AS m
        WHERE m.knowledge_base_id = s.id AND m.status = 'published')
FROM knowledge_base AS s
WHERE s.tenant_id = :tenant_id AND s.kind = 'memories'
ORDER BY s.name
"""

# A memory of the store with this content as its current text, forgotten or not. The columns
# are a `MemoryState`, as are SELECT_MEMORY_STATE's.
SELECT_SAME_CONTENT = """
SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
       (SELECT json_group_array(json_array(t.key, t.value))
        FROM document_tag AS t WHERE t.document_id = m.id)
FROM revision AS r
JOIN document AS m ON m.current_revision_id = r.id
WHERE r.content_hash = :content_hash AND m.knowledge_base_id = :store_id
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


def stores(conn: apsw.Connection, tenant_id: int) -> list[StoreRow]:
    return [StoreRow(*row) for row in conn.execute(SELECT_STORES, {"tenant_id": tenant_id})]


def lock_stores(conn: apsw.Connection, tenant_id: int) -> None:
    """Nothing to do: a write transaction (BEGIN IMMEDIATE) is the only writer of the file."""


def same_content(conn: apsw.Connection, store_id: int, content_hash: str) -> MemoryState | None:
    row = conn.execute(
        SELECT_SAME_CONTENT, {"content_hash": content_hash, "store_id": store_id}
    ).fetchone()
    return None if row is None else _state(row)


def memory_state(conn: apsw.Connection, tenant_id: int, memory_id: str) -> RevisableMemory | None:
    row = conn.execute(
        SELECT_MEMORY_STATE, {"memory_id": memory_id, "tenant_id": tenant_id}
    ).fetchone()
    return None if row is None else RevisableMemory(_state(row[:7]), *row[7:])


def own_memory(conn: apsw.Connection, tenant_id: int, memory_id: str) -> OwnMemory | None:
    row = conn.execute(
        SELECT_OWN_MEMORY, {"memory_id": memory_id, "tenant_id": tenant_id}
    ).fetchone()
    return None if row is None else OwnMemory(*row)


def memories(
    conn: apsw.Connection,
    tenant_id: int,
    *,
    store_id: int | None,
    include_forgotten: bool,
    limit: int,
) -> list[MemoryRow]:
    rows = conn.execute(
        SELECT_MEMORIES,
        {
            "tenant_id": tenant_id,
            "store_id": store_id,
            "include_forgotten": bool(include_forgotten),
            "limit": limit,
        },
    )
    return [MemoryRow(*row[:10], _pairs(row[10])) for row in rows]


def _state(row: tuple) -> MemoryState:
    return MemoryState(*row[:6], _pairs(row[6]))


def _pairs(tag_json: str | None) -> list[tuple[str, str]]:
    return [(key, value) for key, value in json.loads(tag_json or "[]")]
