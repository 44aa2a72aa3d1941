"""SQL for tenants, knowledge bases, documents, revisions and chunks (the write side of ingest)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import apsw

from kbmcp.clock import now_iso
from kbmcp.errors import InvalidRequest
from kbmcp.ids import looks_like_id
from kbmcp.store.sqlite.id_key import id_key_of

LOCAL_TENANT = "local"
DEFAULT_KB = "default"
DEFAULT_MEMORY_STORE = "memories"  # the store `remember` uses when none is named

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
SELECT_CHUNKS_WITH_VECTORS = """
SELECT c.heading_path, c.text, v.embedding
FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
"""


@dataclass(frozen=True)
class TenantRef:
    id: int
    public_id: str


DOCUMENTS = "documents"  # knowledge_base.kind of a knowledge base
MEMORIES = "memories"  # knowledge_base.kind of a memory store
# The public id kind (kbmcp/ids.py) of each knowledge_base kind, and what the CLI calls it.
ID_KIND = {DOCUMENTS: "knowledge_base", MEMORIES: "memory_store"}
KIND_NAME = {DOCUMENTS: "knowledge base", MEMORIES: "memory store"}
# The `kind` a result, fetched chunk or scan item reports for a row of each knowledge_base kind.
RESULT_KIND: dict[str, Literal["document", "memory"]] = {DOCUMENTS: "document", MEMORIES: "memory"}


@dataclass(frozen=True)
class KnowledgeBaseRef:
    id: int
    public_id: str
    name: str
    kind: str = DOCUMENTS


@dataclass(frozen=True)
class NamedTenant:
    id: int
    public_id: str
    name: str

    @property
    def ref(self) -> TenantRef:
        return TenantRef(self.id, self.public_id)


@dataclass(frozen=True)
class OwnedKnowledgeBase:
    """A knowledge base with its owner tenant."""

    id: int
    public_id: str
    name: str
    owner: NamedTenant


def find_tenant_by_ref(conn: apsw.Connection, ref: str) -> NamedTenant | None:
    """The tenant whose name or public id is `ref`."""
    row = conn.execute(SELECT_TENANT_BY_REF, {"ref": ref}).fetchone()
    return None if row is None else NamedTenant(*row)


def find_knowledge_bases_by_ref(conn: apsw.Connection, ref: str) -> list[OwnedKnowledgeBase]:
    """Every knowledge base whose public id or name is `ref` (names repeat across tenants)."""
    return [
        OwnedKnowledgeBase(kb_id, public_id, name, NamedTenant(t_id, t_public, t_name))
        for kb_id, public_id, name, t_id, t_public, t_name in conn.execute(
            SELECT_KBS_BY_REF, {"ref": ref}
        )
    ]


def ensure_tenant(conn: apsw.Connection, name: str = LOCAL_TENANT) -> TenantRef:
    """The tenant named `name`, created on first use (the single-user default is 'local')."""
    row = conn.execute(SELECT_TENANT, {"name": name}).fetchone()
    if row is None:
        conn.execute(
            INSERT_TENANT,
            {"public_id": id_key_of(conn).make("tenant", name), "name": name, "now": now_iso()},
        )
        row = conn.execute(SELECT_TENANT, {"name": name}).fetchone()
    return TenantRef(row[0], row[1])


def find_knowledge_base(
    conn: apsw.Connection, tenant: TenantRef, name: str
) -> KnowledgeBaseRef | None:
    """The tenant's knowledge base or memory store named `name` (see `.kind`)."""
    row = conn.execute(SELECT_KB_BY_NAME, {"tenant_id": tenant.id, "name": name}).fetchone()
    return None if row is None else KnowledgeBaseRef(row[0], row[1], name, row[2])


def find_knowledge_base_by_id(
    conn: apsw.Connection, tenant: TenantRef, public_id: str
) -> KnowledgeBaseRef | None:
    """The tenant's knowledge base or memory store with this public id."""
    row = conn.execute(
        SELECT_KB_BY_PUBLIC_ID, {"tenant_id": tenant.id, "public_id": public_id}
    ).fetchone()
    return None if row is None else KnowledgeBaseRef(*row)


def ensure_knowledge_base(
    conn: apsw.Connection,
    tenant: TenantRef,
    name: str = DEFAULT_KB,
    description: str = "",
    *,
    kind: str = DOCUMENTS,
    tags: dict[str, str] | None = None,
) -> KnowledgeBaseRef:
    """The tenant's knowledge base (or, with kind=MEMORIES, memory store) named `name`, created
    if new. The name taken by the other kind is an `InvalidRequest` naming it."""
    found = find_knowledge_base(conn, tenant, name)
    if found is None:
        if looks_like_id(name):
            # `--kb kb_...` means an existing knowledge base: a new one named like an id would
            # turn a mistyped or foreign id into a silently created, empty knowledge base.
            raise InvalidRequest(
                f"{name!r} looks like an id, not a name: no {KIND_NAME[kind]} of this tenant "
                f"has that id; pick a name that is not shaped like an id to create one",
                details={"argument": "name", "value": name},
            )
        # Each kind's default name is kept for it, so neither default can be taken by the other.
        reserved = {DOCUMENTS: DEFAULT_MEMORY_STORE, MEMORIES: DEFAULT_KB}[kind]
        if name == reserved:
            raise InvalidRequest(
                f"{name!r} is reserved for the default {KIND_NAME[_other(kind)]}; pick another "
                f"name for the {KIND_NAME[kind]}",
                details={"argument": "name", "value": name},
            )
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
    if found.kind != kind:
        raise InvalidRequest(
            f"{name!r} is the name of a {KIND_NAME[found.kind]} ({found.public_id}); a "
            f"tenant's knowledge bases and memory stores share names, so pick another",
            details={"argument": "name", "value": name, "taken_by": found.public_id},
        )
    return found


def _other(kind: str) -> str:
    return MEMORIES if kind == DOCUMENTS else DOCUMENTS


def dump_json(value: object) -> str:
    """Canonical JSON for stored objects (sorted keys, no ASCII escaping)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
