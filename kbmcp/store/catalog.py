"""The catalog concern of the store contract: tenants, knowledge bases (and memory stores), and
the rows ingest writes for a document (documents, revisions, chunks, tags).

Implemented by kbmcp/store/sqlite/catalog.py and kbmcp/store/postgres/catalog.py. This module
holds what both share: the row types, the names kbmcp gives by default, the rules a new
knowledge base's name must follow, the Protocol, and `SqlCatalog`, the logic both run over their
own statements.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from kbmcp.clock import now_iso
from kbmcp.errors import InvalidRequest
from kbmcp.ids import looks_like_id
from kbmcp.memory_defaults import DEFAULT_MEMORY_STORE

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect
    from kbmcp.store.id_key import IdKeys

LOCAL_TENANT = "local"
DEFAULT_KB = "default"

DOCUMENTS = "documents"  # knowledge_base.kind of a knowledge base
MEMORIES = "memories"  # knowledge_base.kind of a memory store
# The public id kind (kbmcp/ids.py) of each knowledge_base kind, and what the CLI calls it.
ID_KIND = {DOCUMENTS: "knowledge_base", MEMORIES: "memory_store"}
KIND_NAME = {DOCUMENTS: "knowledge base", MEMORIES: "memory store"}
# The `kind` a result, fetched chunk or scan item reports for a row of each knowledge_base kind.
RESULT_KIND: dict[str, Literal["document", "memory"]] = {DOCUMENTS: "document", MEMORIES: "memory"}


@dataclass(frozen=True)
class TenantRef:
    id: int
    public_id: str


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


@dataclass(frozen=True)
class DocumentState:
    """What ingest needs to decide skip / update / restore for a path (one row per document of
    a knowledge base); the revision fields are None for a document without a current one."""

    id: int
    public_id: str
    path: str
    title: str
    status: str
    source: str | None
    attributes_hash: str
    revision_id: int | None
    content_hash: str | None


@dataclass(frozen=True)
class CurrentDocument:
    """A document as a write finds it, re-read inside the write transaction."""

    id: int
    public_id: str
    status: str
    current_revision_id: int | None
    content_hash: str | None
    attributes_hash: str
    source: str | None


@dataclass(frozen=True)
class NewDocument:
    public_id: str
    knowledge_base_id: int
    path: str
    title: str
    kind: str
    source: str | None
    metadata: str  # JSON text (dump_json)

    def parameters(self, now: str) -> dict[str, object]:
        """The named parameters of every backend's document inserts (published or staged)."""
        return {
            "public_id": self.public_id,
            "kb_id": self.knowledge_base_id,
            "path": self.path,
            "title": self.title,
            "kind": self.kind,
            "source": self.source,
            "metadata": self.metadata,
            "now": now,
        }


@dataclass(frozen=True)
class DocumentAttributes:
    """What a write sets on a document besides its tags: attributes and current revision."""

    title: str
    kind: str
    source: str | None
    metadata: str  # JSON text (dump_json)
    revision_id: int
    attributes_hash: str


@dataclass(frozen=True)
class NewRevision:
    public_id: str
    document_id: int
    number: int
    content: str
    content_hash: str
    char_count: int
    line_count: int


@dataclass(frozen=True)
class NewChunk:
    public_id: str
    ordinal: int
    heading_path: str  # JSON text: the list of headings
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    text: str


@dataclass(frozen=True)
class StoredChunk:
    id: int
    ordinal: int
    heading_path: str  # JSON text
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    text: str


@dataclass(frozen=True)
class ChunkWithVector:
    heading_path: str  # JSON text
    text: str
    embedding: bytes  # little-endian float32 (kbmcp/store/vectors.py)


class Catalog(Protocol):
    # ---------------------------------------------------------------- tenants

    def find_tenant(self, conn: Connection, name: str) -> TenantRef | None:
        """The tenant named `name`."""
        ...

    def find_tenant_by_ref(self, conn: Connection, ref: str) -> NamedTenant | None:
        """The tenant whose name or public id (ten_...) is `ref`."""
        ...

    def ensure_tenant(self, conn: Connection, name: str = LOCAL_TENANT) -> TenantRef:
        """The tenant named `name`, created on first use (inside a write transaction)."""
        ...

    # ---------------------------------------------------------------- knowledge bases

    def find_knowledge_base(
        self, conn: Connection, tenant: TenantRef, name: str
    ) -> KnowledgeBaseRef | None:
        """The tenant's knowledge base or memory store named `name` (see `.kind`)."""
        ...

    def find_knowledge_base_by_id(
        self, conn: Connection, tenant: TenantRef, public_id: str
    ) -> KnowledgeBaseRef | None:
        """The tenant's knowledge base or memory store with this public id."""
        ...

    def find_knowledge_bases_by_ref(self, conn: Connection, ref: str) -> list[OwnedKnowledgeBase]:
        """Every knowledge base (not memory store) whose public id or name is `ref`, across
        tenants (names repeat), ordered by owner name then public id."""
        ...

    def ensure_knowledge_base(
        self,
        conn: Connection,
        tenant: TenantRef,
        name: str = DEFAULT_KB,
        description: str = "",
        *,
        kind: str = DOCUMENTS,
        tags: dict[str, str] | None = None,
    ) -> KnowledgeBaseRef:
        """The tenant's knowledge base (or, with kind=MEMORIES, memory store) named `name`,
        created if new (inside a write transaction); `check_new_name` and `check_kind` say
        which names are refused."""
        ...

    # ---------------------------------------------------------------- documents

    def document_states(self, conn: Connection, knowledge_base_id: int) -> list[DocumentState]:
        """Every document of the knowledge base, with its current revision's content hash."""
        ...

    def current_document(
        self, conn: Connection, knowledge_base_id: int, path: str
    ) -> CurrentDocument | None:
        """The document at `path` as it is now; on PostgreSQL its row stays locked until the
        transaction ends (two servers writing the same path take turns)."""
        ...

    def document_id_taken(self, conn: Connection, public_id: str) -> bool:
        """Whether a document (or memory) already has this public id."""
        ...

    def insert_document(self, conn: Connection, document: NewDocument, now: str) -> int | None:
        """A new published document without a current revision yet (set by
        `update_document` in the same transaction); returns its row id. None when another
        writer added a document at the path (or with the public id) meanwhile: two servers
        adding one path at once on PostgreSQL, where the insert waits for the other's
        transaction; the caller reads the document again (`current_document`)."""
        ...

    def update_document(
        self, conn: Connection, document_id: int, attributes: DocumentAttributes, now: str
    ) -> None:
        """Set the attributes and current revision, and publish the document."""
        ...

    def replace_tags(
        self, conn: Connection, document_id: int, tags: Sequence[tuple[str, str]]
    ) -> None:
        """The document's tags become `tags` (key, value) pairs."""
        ...

    def archive_document(self, conn: Connection, document_id: int, now: str) -> None: ...

    def next_revision_number(self, conn: Connection, document_id: int) -> int:
        """1 for a document without revisions, else one more than its last."""
        ...

    def insert_revision(self, conn: Connection, revision: NewRevision, now: str) -> int:
        """A new immutable revision (without chunks); returns its row id."""
        ...

    def insert_chunks(
        self, conn: Connection, revision_id: int, chunks: Sequence[NewChunk]
    ) -> list[int]:
        """The chunk rows of a revision; returns their row ids in the order given."""
        ...

    def stored_chunks(self, conn: Connection, revision_id: int) -> list[StoredChunk]:
        """The chunks of a revision by ordinal."""
        ...

    def chunks_with_vectors(self, conn: Connection, revision_id: int) -> list[ChunkWithVector]:
        """The chunks of a revision that have a stored vector, with it (in no set order)."""
        ...


class SqlCatalog:
    """The catalog (the `Catalog` Protocol) over a backend's statements: a backend subclasses it
    with its statements (the upper-case class attributes, named parameters), its dialect and its
    id keys, and overrides only what its driver does differently."""

    dialect: ClassVar[Dialect]
    id_keys: ClassVar[IdKeys]

    INSERT_TENANT: ClassVar[str]
    SELECT_TENANT: ClassVar[str]
    SELECT_TENANT_BY_REF: ClassVar[str]
    INSERT_KB: ClassVar[str]
    SELECT_KB_BY_NAME: ClassVar[str]
    SELECT_KB_BY_PUBLIC_ID: ClassVar[str]
    SELECT_KBS_BY_REF: ClassVar[str]
    SELECT_DOCUMENT_STATES: ClassVar[str]
    INSERT_DOCUMENT: ClassVar[str]
    SELECT_DOCUMENT_FOR_UPDATE: ClassVar[str]
    DOCUMENT_ID_TAKEN: ClassVar[str]
    NEXT_REVISION_NUMBER: ClassVar[str]
    UPDATE_DOCUMENT: ClassVar[str]
    ARCHIVE_DOCUMENT: ClassVar[str]
    DELETE_TAGS: ClassVar[str]
    INSERT_TAG: ClassVar[str]
    INSERT_REVISION: ClassVar[str]
    INSERT_CHUNK: ClassVar[str]
    SELECT_STORED_CHUNKS: ClassVar[str]
    SELECT_CHUNKS_WITH_VECTORS: ClassVar[str]

    # ---------------------------------------------------------------- tenants

    def find_tenant(self, conn: Connection, name: str) -> TenantRef | None:
        row = conn.execute(self.SELECT_TENANT, {"name": name}).fetchone()
        return None if row is None else TenantRef(row[0], row[1])

    def find_tenant_by_ref(self, conn: Connection, ref: str) -> NamedTenant | None:
        row = conn.execute(self.SELECT_TENANT_BY_REF, {"ref": ref}).fetchone()
        return None if row is None else NamedTenant(*row)

    def ensure_tenant(self, conn: Connection, name: str = LOCAL_TENANT) -> TenantRef:
        found = self.find_tenant(conn, name)
        if found is None:
            conn.execute(
                self.INSERT_TENANT,
                {
                    "public_id": self.id_keys.id_key_of(conn).make("tenant", name),
                    "name": name,
                    "now": now_iso(),
                },
            )
            # Ours, or (PostgreSQL) the one another server committed first (READ COMMITTED:
            # visible now).
            found = self.find_tenant(conn, name)
            assert found is not None
        return found

    # ---------------------------------------------------------------- knowledge bases

    def find_knowledge_base(
        self, conn: Connection, tenant: TenantRef, name: str
    ) -> KnowledgeBaseRef | None:
        row = conn.execute(
            self.SELECT_KB_BY_NAME, {"tenant_id": tenant.id, "name": name}
        ).fetchone()
        return None if row is None else KnowledgeBaseRef(row[0], row[1], name, row[2])

    def find_knowledge_base_by_id(
        self, conn: Connection, tenant: TenantRef, public_id: str
    ) -> KnowledgeBaseRef | None:
        row = conn.execute(
            self.SELECT_KB_BY_PUBLIC_ID, {"tenant_id": tenant.id, "public_id": public_id}
        ).fetchone()
        return None if row is None else KnowledgeBaseRef(*row)

    def find_knowledge_bases_by_ref(self, conn: Connection, ref: str) -> list[OwnedKnowledgeBase]:
        return [
            OwnedKnowledgeBase(kb_id, public_id, name, NamedTenant(t_id, t_public, t_name))
            for kb_id, public_id, name, t_id, t_public, t_name in conn.execute(
                self.SELECT_KBS_BY_REF, {"ref": ref}
            )
        ]

    def ensure_knowledge_base(
        self,
        conn: Connection,
        tenant: TenantRef,
        name: str = DEFAULT_KB,
        description: str = "",
        *,
        kind: str = DOCUMENTS,
        tags: dict[str, str] | None = None,
    ) -> KnowledgeBaseRef:
        found = self.find_knowledge_base(conn, tenant, name)
        if found is None:
            check_new_name(name, kind)
            conn.execute(
                self.INSERT_KB,
                {
                    "public_id": self.id_keys.id_key_of(conn).make(
                        ID_KIND[kind], tenant.public_id, name
                    ),
                    "tenant_id": tenant.id,
                    "name": name,
                    "description": description,
                    "kind": kind,
                    "tags": dump_json(tags or {}),
                    "now": now_iso(),
                },
            )
            found = self.find_knowledge_base(conn, tenant, name)
            assert found is not None
        return check_kind(found, name, kind)

    # ---------------------------------------------------------------- documents

    def document_states(self, conn: Connection, knowledge_base_id: int) -> list[DocumentState]:
        return [
            DocumentState(*row)
            for row in conn.execute(self.SELECT_DOCUMENT_STATES, {"kb_id": knowledge_base_id})
        ]

    def current_document(
        self, conn: Connection, knowledge_base_id: int, path: str
    ) -> CurrentDocument | None:
        row = conn.execute(
            self.SELECT_DOCUMENT_FOR_UPDATE, {"kb_id": knowledge_base_id, "path": path}
        ).fetchone()
        return None if row is None else CurrentDocument(*row)

    def document_id_taken(self, conn: Connection, public_id: str) -> bool:
        return conn.execute(self.DOCUMENT_ID_TAKEN, {"public_id": public_id}).fetchone() is not None

    def insert_document(self, conn: Connection, document: NewDocument, now: str) -> int | None:
        return self.dialect.insert(conn, self.INSERT_DOCUMENT, document.parameters(now))

    def update_document(
        self, conn: Connection, document_id: int, attributes: DocumentAttributes, now: str
    ) -> None:
        conn.execute(
            self.UPDATE_DOCUMENT,
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

    def replace_tags(
        self, conn: Connection, document_id: int, tags: Sequence[tuple[str, str]]
    ) -> None:
        conn.execute(self.DELETE_TAGS, {"document_id": document_id})
        self.dialect.execute_many(
            conn,
            self.INSERT_TAG,
            [{"document_id": document_id, "key": k, "value": v} for k, v in tags],
        )

    def archive_document(self, conn: Connection, document_id: int, now: str) -> None:
        conn.execute(self.ARCHIVE_DOCUMENT, {"document_id": document_id, "now": now})

    def next_revision_number(self, conn: Connection, document_id: int) -> int:
        row = conn.execute(self.NEXT_REVISION_NUMBER, {"document_id": document_id}).fetchone()
        return int(row[0])

    def insert_revision(self, conn: Connection, revision: NewRevision, now: str) -> int:
        revision_id = self.dialect.insert(
            conn,
            self.INSERT_REVISION,
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
        assert revision_id is not None  # the statement has no ON CONFLICT
        return revision_id

    def insert_chunks(
        self, conn: Connection, revision_id: int, chunks: Sequence[NewChunk]
    ) -> list[int]:
        chunk_ids = []
        for params in chunk_parameters(revision_id, chunks):
            chunk_id = self.dialect.insert(conn, self.INSERT_CHUNK, params)
            assert chunk_id is not None  # the statement has no ON CONFLICT
            chunk_ids.append(chunk_id)
        return chunk_ids

    def stored_chunks(self, conn: Connection, revision_id: int) -> list[StoredChunk]:
        return [
            StoredChunk(*row)
            for row in conn.execute(self.SELECT_STORED_CHUNKS, {"revision_id": revision_id})
        ]

    def chunks_with_vectors(self, conn: Connection, revision_id: int) -> list[ChunkWithVector]:
        return [
            ChunkWithVector(*row)
            for row in conn.execute(self.SELECT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id})
        ]


def chunk_parameters(revision_id: int, chunks: Sequence[NewChunk]) -> list[dict[str, object]]:
    """The named parameters of INSERT_CHUNK for each chunk of a revision."""
    return [
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


# ------------------------------------------------------------------ rules both backends apply


def check_new_name(name: str, kind: str) -> None:
    """Refuse a name a new knowledge base or memory store cannot have (`InvalidRequest`)."""
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


def check_kind(found: KnowledgeBaseRef, name: str, kind: str) -> KnowledgeBaseRef:
    """`found` if it is of `kind`; else the name is taken by the other kind (`InvalidRequest`)."""
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
