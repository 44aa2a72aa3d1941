"""The catalog concern (kbmcp/store/catalog.py) on PostgreSQL: tenants, knowledge bases, and the
document, revision, chunk and tag rows ingest writes.

The statements are SQLite's (kbmcp/store/sqlite/catalog.py) with these differences:
- new rows' ids come back from `RETURNING id`;
- inserts that may race with another server's use `ON CONFLICT DO NOTHING` on every unique
  constraint (a tenant's public id and name are both unique, and made from the name);
- the document a write is about is locked (`FOR UPDATE OF d`) until its transaction ends, so
  two servers writing one path take turns instead of both inserting a revision;
- text is ordered byte by byte (`COLLATE "C"`, SQLite's BINARY), whatever the database's
  collation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from kbmcp.clock import now_iso
from kbmcp.store.catalog import (
    DEFAULT_KB,
    DOCUMENTS,
    ID_KIND,
    LOCAL_TENANT,
    ChunkWithVector,
    CurrentDocument,
    DocumentAttributes,
    DocumentState,
    KnowledgeBaseRef,
    NamedTenant,
    NewChunk,
    NewDocument,
    NewRevision,
    OwnedKnowledgeBase,
    StoredChunk,
    TenantRef,
    check_kind,
    check_new_name,
    dump_json,
)
from kbmcp.store.postgres.id_key import id_key_of

PgConnection = psycopg.Connection[Any]

INSERT_TENANT = """
INSERT INTO tenant (public_id, name, created_at) VALUES (%(public_id)s, %(name)s, %(now)s)
ON CONFLICT DO NOTHING
"""
SELECT_TENANT = "SELECT id, public_id FROM tenant WHERE name = %(name)s"
SELECT_TENANT_BY_REF = """
SELECT id, public_id, name FROM tenant WHERE name = %(ref)s OR public_id = %(ref)s
"""

INSERT_KB = """
INSERT INTO knowledge_base (public_id, tenant_id, name, description, kind, tags, created_at,
                            updated_at)
VALUES (%(public_id)s, %(tenant_id)s, %(name)s, %(description)s, %(kind)s, %(tags)s, %(now)s,
        %(now)s)
ON CONFLICT DO NOTHING
"""
SELECT_KB_BY_NAME = """
SELECT id, public_id, kind FROM knowledge_base WHERE tenant_id = %(tenant_id)s AND name = %(name)s
"""
SELECT_KB_BY_PUBLIC_ID = """
SELECT id, public_id, name, kind FROM knowledge_base
WHERE tenant_id = %(tenant_id)s AND public_id = %(public_id)s
"""
SELECT_KBS_BY_REF = """
SELECT kb.id, kb.public_id, kb.name, t.id, t.public_id, t.name
FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id
WHERE (kb.public_id = %(ref)s OR kb.name = %(ref)s) AND kb.kind = 'documents'
ORDER BY t.name COLLATE "C", kb.public_id COLLATE "C"
"""

SELECT_DOCUMENT_STATES = """
SELECT d.id, d.public_id, d.path, d.title, d.status, d.source, d.attributes_hash,
       r.id, r.content_hash
FROM document AS d
LEFT JOIN revision AS r ON r.id = d.current_revision_id
WHERE d.knowledge_base_id = %(kb_id)s
"""
# Multi-writer: two servers adding one path at once both found no document there; the second
# insert waits for the first's transaction, then does nothing (None), and ingest reads the
# document again. Any unique constraint counts (path, or the public id made from it).
INSERT_DOCUMENT = """
INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                      status, created_at, updated_at)
VALUES (%(public_id)s, %(kb_id)s, %(path)s, %(title)s, %(kind)s, %(source)s, %(metadata)s,
        'published', %(now)s, %(now)s)
ON CONFLICT DO NOTHING
RETURNING id
"""
# FOR UPDATE OF d: the document row only (the revision is on the nullable side of the join).
SELECT_DOCUMENT_FOR_UPDATE = """
SELECT d.id, d.public_id, d.status, d.current_revision_id, r.content_hash, d.attributes_hash,
       d.source
FROM document AS d
LEFT JOIN revision AS r ON r.id = d.current_revision_id
WHERE d.knowledge_base_id = %(kb_id)s AND d.path = %(path)s
FOR UPDATE OF d
"""
DOCUMENT_ID_TAKEN = "SELECT 1 FROM document WHERE public_id = %(public_id)s"
NEXT_REVISION_NUMBER = """
SELECT COALESCE(MAX(number), 0) + 1 FROM revision WHERE document_id = %(document_id)s
"""
UPDATE_DOCUMENT = """
UPDATE document
SET title = %(title)s, kind = %(kind)s, source = %(source)s, metadata = %(metadata)s,
    status = 'published', current_revision_id = %(revision_id)s,
    attributes_hash = %(attributes_hash)s, updated_at = %(now)s
WHERE id = %(document_id)s
"""
ARCHIVE_DOCUMENT = """
UPDATE document SET status = 'archived', updated_at = %(now)s WHERE id = %(document_id)s
"""
DELETE_TAGS = "DELETE FROM document_tag WHERE document_id = %(document_id)s"
INSERT_TAG = """
INSERT INTO document_tag (document_id, key, value) VALUES (%(document_id)s, %(key)s, %(value)s)
ON CONFLICT DO NOTHING
"""
INSERT_REVISION = """
INSERT INTO revision (public_id, document_id, number, content, content_hash, char_count,
                      line_count, created_at)
VALUES (%(public_id)s, %(document_id)s, %(number)s, %(content)s, %(content_hash)s,
        %(char_count)s, %(line_count)s, %(now)s)
RETURNING id
"""
INSERT_CHUNK = """
INSERT INTO chunk (public_id, revision_id, ordinal, heading_path, char_start, char_end,
                   line_start, line_end, text)
VALUES (%(public_id)s, %(revision_id)s, %(ordinal)s, %(heading_path)s, %(char_start)s,
        %(char_end)s, %(line_start)s, %(line_end)s, %(text)s)
RETURNING id
"""
SELECT_STORED_CHUNKS = """
SELECT id, ordinal, heading_path, char_start, char_end, line_start, line_end, text
FROM chunk WHERE revision_id = %(revision_id)s ORDER BY ordinal
"""
SELECT_CHUNKS_WITH_VECTORS = """
SELECT c.heading_path, c.text, v.embedding
FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = %(revision_id)s
"""


# ------------------------------------------------------------------ tenants


def find_tenant(conn: PgConnection, name: str) -> TenantRef | None:
    row = conn.execute(SELECT_TENANT, {"name": name}).fetchone()
    return None if row is None else TenantRef(row[0], row[1])


def find_tenant_by_ref(conn: PgConnection, ref: str) -> NamedTenant | None:
    row = conn.execute(SELECT_TENANT_BY_REF, {"ref": ref}).fetchone()
    return None if row is None else NamedTenant(*row)


def ensure_tenant(conn: PgConnection, name: str = LOCAL_TENANT) -> TenantRef:
    found = find_tenant(conn, name)
    if found is None:
        conn.execute(
            INSERT_TENANT,
            {"public_id": id_key_of(conn).make("tenant", name), "name": name, "now": now_iso()},
        )
        # Ours, or the one another server committed first (READ COMMITTED: visible now).
        found = find_tenant(conn, name)
        assert found is not None
    return found


# ------------------------------------------------------------------ knowledge bases


def find_knowledge_base(
    conn: PgConnection, tenant: TenantRef, name: str
) -> KnowledgeBaseRef | None:
    row = conn.execute(SELECT_KB_BY_NAME, {"tenant_id": tenant.id, "name": name}).fetchone()
    return None if row is None else KnowledgeBaseRef(row[0], row[1], name, row[2])


def find_knowledge_base_by_id(
    conn: PgConnection, tenant: TenantRef, public_id: str
) -> KnowledgeBaseRef | None:
    row = conn.execute(
        SELECT_KB_BY_PUBLIC_ID, {"tenant_id": tenant.id, "public_id": public_id}
    ).fetchone()
    return None if row is None else KnowledgeBaseRef(*row)


def find_knowledge_bases_by_ref(conn: PgConnection, ref: str) -> list[OwnedKnowledgeBase]:
    return [
        OwnedKnowledgeBase(kb_id, public_id, name, NamedTenant(t_id, t_public, t_name))
        for kb_id, public_id, name, t_id, t_public, t_name in conn.execute(
            SELECT_KBS_BY_REF, {"ref": ref}
        )
    ]


def ensure_knowledge_base(
    conn: PgConnection,
    tenant: TenantRef,
    name: str = DEFAULT_KB,
    description: str = "",
    *,
    kind: str = DOCUMENTS,
    tags: dict[str, str] | None = None,
) -> KnowledgeBaseRef:
    found = find_knowledge_base(conn, tenant, name)
    if found is None:
        check_new_name(name, kind)
        conn.execute(
            INSERT_KB,
            {
                "public_id": id_key_of(conn).make(ID_KIND[kind], tenant.public_id, name),
                "tenant_id": tenant.id,
                "name": name,
                "description": description,
                "kind": kind,
                "tags": dump_json(tags or {}),
                "now": now_iso(),
            },
        )
        found = find_knowledge_base(conn, tenant, name)
        assert found is not None
    return check_kind(found, name, kind)


# ------------------------------------------------------------------ documents


def document_states(conn: PgConnection, knowledge_base_id: int) -> list[DocumentState]:
    return [
        DocumentState(*row)
        for row in conn.execute(SELECT_DOCUMENT_STATES, {"kb_id": knowledge_base_id})
    ]


def current_document(
    conn: PgConnection, knowledge_base_id: int, path: str
) -> CurrentDocument | None:
    row = conn.execute(
        SELECT_DOCUMENT_FOR_UPDATE, {"kb_id": knowledge_base_id, "path": path}
    ).fetchone()
    return None if row is None else CurrentDocument(*row)


def document_id_taken(conn: PgConnection, public_id: str) -> bool:
    return conn.execute(DOCUMENT_ID_TAKEN, {"public_id": public_id}).fetchone() is not None


def insert_document(conn: PgConnection, document: NewDocument, now: str) -> int | None:
    row = conn.execute(INSERT_DOCUMENT, document.parameters(now)).fetchone()
    return None if row is None else int(row[0])


def update_document(
    conn: PgConnection, document_id: int, attributes: DocumentAttributes, now: str
) -> None:
    conn.execute(
        UPDATE_DOCUMENT,
        {
            "document_id": document_id,
            "title": attributes.title,
            "kind": attributes.kind,
            "source": attributes.source,
            "metadata": attributes.metadata,
            "revision_id": attributes.revision_id,
            "attributes_hash": attributes.attributes_hash,
            "now": now,
        },
    )


def replace_tags(conn: PgConnection, document_id: int, tags: Sequence[tuple[str, str]]) -> None:
    conn.execute(DELETE_TAGS, {"document_id": document_id})
    if tags:
        with conn.cursor() as cur:
            cur.executemany(
                INSERT_TAG, [{"document_id": document_id, "key": k, "value": v} for k, v in tags]
            )


def archive_document(conn: PgConnection, document_id: int, now: str) -> None:
    conn.execute(ARCHIVE_DOCUMENT, {"document_id": document_id, "now": now})


def next_revision_number(conn: PgConnection, document_id: int) -> int:
    return int(conn.execute(NEXT_REVISION_NUMBER, {"document_id": document_id}).fetchone()[0])


def insert_revision(conn: PgConnection, revision: NewRevision, now: str) -> int:
    row = conn.execute(
        INSERT_REVISION,
        {
            "public_id": revision.public_id,
            "document_id": revision.document_id,
            "number": revision.number,
            "content": revision.content,
            "content_hash": revision.content_hash,
            "char_count": revision.char_count,
            "line_count": revision.line_count,
            "now": now,
        },
    ).fetchone()
    return int(row[0])


def insert_chunks(conn: PgConnection, revision_id: int, chunks: Sequence[NewChunk]) -> list[int]:
    """One round trip for all the chunks (psycopg pipelines executemany); each insert's
    RETURNING row is its own result set, read in the order given."""
    if not chunks:
        return []
    params = [
        {
            "public_id": chunk.public_id,
            "revision_id": revision_id,
            "ordinal": chunk.ordinal,
            "heading_path": chunk.heading_path,
            "char_start": chunk.char_start,
            "char_end": chunk.char_end,
            "line_start": chunk.line_start,
            "line_end": chunk.line_end,
            "text": chunk.text,
        }
        for chunk in chunks
    ]
    chunk_ids = []
    with conn.cursor() as cur:
        cur.executemany(INSERT_CHUNK, params, returning=True)
        while True:
            chunk_ids.append(int(cur.fetchone()[0]))
            if not cur.nextset():
                break
    return chunk_ids


def stored_chunks(conn: PgConnection, revision_id: int) -> list[StoredChunk]:
    return [
        StoredChunk(*row)
        for row in conn.execute(SELECT_STORED_CHUNKS, {"revision_id": revision_id})
    ]


def chunks_with_vectors(conn: PgConnection, revision_id: int) -> list[ChunkWithVector]:
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(SELECT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id}).fetchall()
    return [ChunkWithVector(heading, text, bytes(embedding)) for heading, text, embedding in rows]
