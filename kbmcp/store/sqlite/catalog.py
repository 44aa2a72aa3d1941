"""The catalog concern (kbmcp/store/catalog.py) on SQLite: tenants, knowledge bases, and the
document, revision, chunk and tag rows ingest writes."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

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
from kbmcp.store.sqlite.id_key import id_key_of

INSERT_TENANT = """
INSERT INTO tenant (public_id, name, created_at) VALUES (:public_id, :name, :now)
ON CONFLICT (name) DO NOTHING
"""
SELECT_TENANT = "SELECT id, public_id FROM tenant WHERE name = :name"
# A tenant named by name or by public id (ten_...): the CLI accepts either.
SELECT_TENANT_BY_REF = """
SELECT id, public_id, name FROM tenant WHERE name = :ref OR public_id = :ref
"""

INSERT_KB = """
INSERT INTO knowledge_base (public_id, tenant_id, name, description, kind, tags, created_at,
                            updated_at)
VALUES (:public_id, :tenant_id, :name, :description, :kind, :tags, :now, :now)
ON CONFLICT (tenant_id, name) DO NOTHING
"""
# Either kind: knowledge bases and memory stores of a tenant share names (migration 6).
SELECT_KB_BY_NAME = """
SELECT id, public_id, kind FROM knowledge_base WHERE tenant_id = :tenant_id AND name = :name
"""
SELECT_KB_BY_PUBLIC_ID = """
SELECT id, public_id, name, kind FROM knowledge_base
WHERE tenant_id = :tenant_id AND public_id = :public_id
"""
# Knowledge bases (not memory stores) named by public id (kb_...) or by name, with their owner,
# across tenants.
SELECT_KBS_BY_REF = """
SELECT kb.id, kb.public_id, kb.name, t.id, t.public_id, t.name
FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id
WHERE (kb.public_id = :ref OR kb.name = :ref) AND kb.kind = 'documents'
ORDER BY t.name, kb.public_id
"""

# Everything ingest needs to decide skip / update / restore for each path, in one query per run.
SELECT_DOCUMENT_STATES = """
SELECT d.id, d.public_id, d.path, d.title, d.status, d.source, d.attributes_hash,
       r.id, r.content_hash
FROM document AS d
LEFT JOIN revision AS r ON r.id = d.current_revision_id
WHERE d.knowledge_base_id = :kb_id
"""

INSERT_DOCUMENT = """
INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                      status, created_at, updated_at)
VALUES (:public_id, :kb_id, :path, :title, :kind, :source, :metadata, 'published', :now, :now)
"""
SELECT_DOCUMENT_FOR_UPDATE = """
SELECT d.id, d.public_id, d.status, d.current_revision_id, r.content_hash, d.attributes_hash,
       d.source
FROM document AS d
LEFT JOIN revision AS r ON r.id = d.current_revision_id
WHERE d.knowledge_base_id = :kb_id AND d.path = :path
"""
NEXT_REVISION_NUMBER = """
SELECT COALESCE(MAX(number), 0) + 1 FROM revision WHERE document_id = :document_id
"""
UPDATE_DOCUMENT = """
UPDATE document
SET title = :title, kind = :kind, source = :source, metadata = :metadata,
    status = 'published', current_revision_id = :revision_id,
    attributes_hash = :attributes_hash, updated_at = :now
WHERE id = :document_id
"""
ARCHIVE_DOCUMENT = """
UPDATE document SET status = 'archived', updated_at = :now WHERE id = :document_id
"""
DELETE_TAGS = "DELETE FROM document_tag WHERE document_id = :document_id"
INSERT_TAG = """
INSERT OR IGNORE INTO document_tag (document_id, key, value) VALUES (:document_id, :key, :value)
"""
INSERT_REVISION = """
INSERT INTO revision (public_id, document_id, number, content, content_hash, char_count,
                      line_count, created_at)
VALUES (:public_id, :document_id, :number, :content, :content_hash, :char_count, :line_count, :now)
"""
INSERT_CHUNK = """
INSERT INTO chunk (public_id, revision_id, ordinal, heading_path, char_start, char_end,
                   line_start, line_end, text)
VALUES (:public_id, :revision_id, :ordinal, :heading_path, :char_start, :char_end,
        :line_start, :line_end, :text)
"""
SELECT_STORED_CHUNKS = """
SELECT id, ordinal, heading_path, char_start, char_end, line_start, line_end, text
FROM chunk WHERE revision_id = :revision_id ORDER BY ordinal
"""
DOCUMENT_ID_TAKEN = "SELECT 1 FROM document WHERE public_id = :public_id"
SELECT_CHUNKS_WITH_VECTORS = """
SELECT c.heading_path, c.text, v.embedding
FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
"""


# ------------------------------------------------------------------ tenants


def find_tenant(conn: apsw.Connection, name: str) -> TenantRef | None:
    row = conn.execute(SELECT_TENANT, {"name": name}).fetchone()
    return None if row is None else TenantRef(row[0], row[1])


def find_tenant_by_ref(conn: apsw.Connection, ref: str) -> NamedTenant | None:
    row = conn.execute(SELECT_TENANT_BY_REF, {"ref": ref}).fetchone()
    return None if row is None else NamedTenant(*row)


def ensure_tenant(conn: apsw.Connection, name: str = LOCAL_TENANT) -> TenantRef:
    found = find_tenant(conn, name)
    if found is None:
        conn.execute(
            INSERT_TENANT,
            {"public_id": id_key_of(conn).make("tenant", name), "name": name, "now": now_iso()},
        )
        found = find_tenant(conn, name)
        assert found is not None
    return found


# ------------------------------------------------------------------ knowledge bases


def find_knowledge_base(
    conn: apsw.Connection, tenant: TenantRef, name: str
) -> KnowledgeBaseRef | None:
    row = conn.execute(SELECT_KB_BY_NAME, {"tenant_id": tenant.id, "name": name}).fetchone()
    return None if row is None else KnowledgeBaseRef(row[0], row[1], name, row[2])


def find_knowledge_base_by_id(
    conn: apsw.Connection, tenant: TenantRef, public_id: str
) -> KnowledgeBaseRef | None:
    row = conn.execute(
        SELECT_KB_BY_PUBLIC_ID, {"tenant_id": tenant.id, "public_id": public_id}
    ).fetchone()
    return None if row is None else KnowledgeBaseRef(*row)


def find_knowledge_bases_by_ref(conn: apsw.Connection, ref: str) -> list[OwnedKnowledgeBase]:
    return [
        OwnedKnowledgeBase(kb_id, public_id, name, NamedTenant(t_id, t_public, t_name))
        for kb_id, public_id, name, t_id, t_public, t_name in conn.execute(
            SELECT_KBS_BY_REF, {"ref": ref}
        )
    ]


def ensure_knowledge_base(
    conn: apsw.Connection,
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


def document_states(conn: apsw.Connection, knowledge_base_id: int) -> list[DocumentState]:
    return [
        DocumentState(*row)
        for row in conn.execute(SELECT_DOCUMENT_STATES, {"kb_id": knowledge_base_id})
    ]


def current_document(
    conn: apsw.Connection, knowledge_base_id: int, path: str
) -> CurrentDocument | None:
    row = conn.execute(
        SELECT_DOCUMENT_FOR_UPDATE, {"kb_id": knowledge_base_id, "path": path}
    ).fetchone()
    return None if row is None else CurrentDocument(*row)


def document_id_taken(conn: apsw.Connection, public_id: str) -> bool:
    return conn.execute(DOCUMENT_ID_TAKEN, {"public_id": public_id}).fetchone() is not None


def insert_document(conn: apsw.Connection, document: NewDocument, now: str) -> int | None:
    conn.execute(INSERT_DOCUMENT, document.parameters(now))
    return conn.last_insert_rowid()


def update_document(
    conn: apsw.Connection, document_id: int, attributes: DocumentAttributes, now: str
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


def replace_tags(conn: apsw.Connection, document_id: int, tags: Sequence[tuple[str, str]]) -> None:
    conn.execute(DELETE_TAGS, {"document_id": document_id})
    conn.executemany(
        INSERT_TAG, [{"document_id": document_id, "key": k, "value": v} for k, v in tags]
    )


def archive_document(conn: apsw.Connection, document_id: int, now: str) -> None:
    conn.execute(ARCHIVE_DOCUMENT, {"document_id": document_id, "now": now})


def next_revision_number(conn: apsw.Connection, document_id: int) -> int:
    return int(conn.execute(NEXT_REVISION_NUMBER, {"document_id": document_id}).fetchone()[0])


def insert_revision(conn: apsw.Connection, revision: NewRevision, now: str) -> int:
    conn.execute(
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
    )
    return conn.last_insert_rowid()


def insert_chunks(conn: apsw.Connection, revision_id: int, chunks: Sequence[NewChunk]) -> list[int]:
    chunk_ids = []
    for chunk in chunks:
        conn.execute(
            INSERT_CHUNK,
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
            },
        )
        chunk_ids.append(conn.last_insert_rowid())
    return chunk_ids


def stored_chunks(conn: apsw.Connection, revision_id: int) -> list[StoredChunk]:
    return [
        StoredChunk(*row)
        for row in conn.execute(SELECT_STORED_CHUNKS, {"revision_id": revision_id})
    ]


def chunks_with_vectors(conn: apsw.Connection, revision_id: int) -> list[ChunkWithVector]:
    return [
        ChunkWithVector(*row)
        for row in conn.execute(SELECT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id})
    ]
