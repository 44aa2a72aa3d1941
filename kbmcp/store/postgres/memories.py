"""The reads of memories on PostgreSQL (the contract: kbmcp/store/memories.py): SQLite's
statements with tags as arrays of pairs and names, timestamps and public ids ordered as bytes
(`COLLATE "C"`, SQLite's BINARY)."""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.store.memories import MemoryRow, MemoryState, OwnMemory, RevisableMemory, StoreRow

PgConnection = psycopg.Connection[Any]

SELECT_STORES = """
SELECT s.id, s.public_id, s.name, s.tags, s.created_at,
       (SELECT count(*) FROM document AS m
        WHERE m.knowledge_base_id = s.id AND m.status = 'published')
FROM knowledge_base AS s
WHERE s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
ORDER BY s.name COLLATE "C"
"""
# Several servers write one database: a store's name is checked free and then inserted, so two
# transactions creating a store of one tenant take turns on the tenant's row. NO KEY UPDATE: it
# does not block the foreign-key checks (KEY SHARE) of other inserts for the tenant.
LOCK_TENANT = "SELECT 1 FROM tenant WHERE id = %(tenant_id)s FOR NO KEY UPDATE"

# A memory of the store with this content as its current text, forgotten or not. Two memories
# of a store never hold one text (remember refuses it), so there is at most one row.
SELECT_SAME_CONTENT = """
SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
       ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t WHERE t.document_id = m.id)
FROM revision AS r
JOIN document AS m ON m.current_revision_id = r.id
WHERE r.content_hash = %(content_hash)s AND m.knowledge_base_id = %(store_id)s
"""
SELECT_MEMORY_STATE = """
SELECT m.public_id, m.status, m.source, m.attributes_hash, r.id, r.content_hash,
       ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t WHERE t.document_id = m.id),
       s.id, s.public_id, s.name
FROM document AS m
JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
LEFT JOIN revision AS r ON r.id = m.current_revision_id
WHERE m.public_id = %(memory_id)s AND s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
"""
SELECT_OWN_MEMORY = """
SELECT m.id, m.public_id, m.status, s.public_id, m.updated_at, r.public_id
FROM document AS m
JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
LEFT JOIN revision AS r ON r.id = m.current_revision_id
WHERE m.public_id = %(memory_id)s AND s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
"""
# Trap: a parameter only compared with NULL has no type PostgreSQL can infer: `::bigint`.
SELECT_MEMORIES = """
SELECT m.public_id, s.public_id, s.name, m.status, r.content, m.source, m.created_at,
       m.updated_at, r.public_id, r.number,
       ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t
             WHERE t.document_id = m.id ORDER BY t.key COLLATE "C", t.value COLLATE "C")
FROM document AS m
JOIN knowledge_base AS s ON s.id = m.knowledge_base_id
JOIN revision AS r ON r.id = m.current_revision_id
WHERE s.tenant_id = %(tenant_id)s AND s.kind = 'memories'
  AND (%(store_id)s::bigint IS NULL OR s.id = %(store_id)s)
  AND (%(include_forgotten)s OR m.status = 'published')
ORDER BY m.updated_at COLLATE "C" DESC, m.public_id COLLATE "C"
LIMIT %(limit)s
"""


def stores(conn: PgConnection, tenant_id: int) -> list[StoreRow]:
    return [StoreRow(*row) for row in conn.execute(SELECT_STORES, {"tenant_id": tenant_id})]


def lock_stores(conn: PgConnection, tenant_id: int) -> None:
    conn.execute(LOCK_TENANT, {"tenant_id": tenant_id})


def same_content(conn: PgConnection, store_id: int, content_hash: str) -> MemoryState | None:
    row = conn.execute(
        SELECT_SAME_CONTENT, {"content_hash": content_hash, "store_id": store_id}
    ).fetchone()
    return None if row is None else _state(row)


def memory_state(conn: PgConnection, tenant_id: int, memory_id: str) -> RevisableMemory | None:
    row = conn.execute(
        SELECT_MEMORY_STATE, {"memory_id": memory_id, "tenant_id": tenant_id}
    ).fetchone()
    return None if row is None else RevisableMemory(_state(row[:7]), *row[7:])


def own_memory(conn: PgConnection, tenant_id: int, memory_id: str) -> OwnMemory | None:
    row = conn.execute(
        SELECT_OWN_MEMORY, {"memory_id": memory_id, "tenant_id": tenant_id}
    ).fetchone()
    return None if row is None else OwnMemory(*row)


def memories(
    conn: PgConnection,
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


def _pairs(pairs: list[list[str]]) -> list[tuple[str, str]]:
    return [(key, value) for key, value in pairs]
