"""Memories: facts agents write (`remember`), find next to documents, and retract (`forget`).

A memory store is a tenant's named, tagged container of memories; a memory is a short text with
tags and a source. Both live in the document tables (migration 6): a store is a knowledge_base
row of kind 'memories', a memory a document in it whose path is its own id. So a memory is
chunked, embedded and indexed by the same write path as a document (`IngestBatch`), has
immutable revisions, and is ranked with documents by the same statement (kbmcp/search/).

- `remember` never duplicates: the same content in the same store is the same memory (its id
  is returned again, with any new tags added; a forgotten one comes back).
- A caller that may write memories but not read them (`memory:write` without `memory:read`)
  learns nothing of what is stored: `remember` answers it in the same shape whether the content
  was new, stored already or forgotten (outcome 'stored', only the tags it sent), and embeds the
  text either way, so the answer takes about as long; revising its own memory into text another
  memory holds is written, not refused (docs/security.md, threat model).
- `forget` is a soft delete: the memory leaves the indexes at once (no search or chunk fetch
  returns it) while its rows stay for audit (`kbmcp memory list --all`).
- Memory stores are private to their tenant: never shared, and not limited by a token's
  knowledge-base allow-list; the memory:read and memory:write scopes govern them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from kbmcp.access import MEMORY_READ, MEMORY_WRITE, Principal
from kbmcp.described import Described
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import InvalidRequest, ResourceUnavailable, StoreError
from kbmcp.ids import check_id
from kbmcp.ingest.chunker import ChunkingOptions, ChunkSpan, chunk_document
from kbmcp.memory_defaults import DEFAULT_LIST, MAX_LIST
from kbmcp.store.catalog import DEFAULT_MEMORY_STORE, MEMORIES, KnowledgeBaseRef, TenantRef
from kbmcp.store.memories import MemoryState, OwnMemory
from kbmcp.store.vectors import to_blob
from kbmcp.tags import TagObject, tag_object
from kbmcp.validate import collection_name, integer, shown, storable
from kbmcp.workspace import Workspace, holding_lock

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection, Store

DEFAULT_STORE = DEFAULT_MEMORY_STORE
MAX_MEMORY_CHARS = 20_000  # a memory is a fact, not a document: add long text with `kbmcp add`
MAX_SOURCE_CHARS = 500
MAX_TAGS = 50
CHUNKING = ChunkingOptions()
# Memories are chunked as plain text: a memory that starts with '---' is not front matter.
MEMORY_FORMAT = "text"

# How often `remember` reads a memory again when another process wrote it between the read and
# the write (each time it found it changed); then it gives up with a store error.
WRITE_ATTEMPTS = 5

Outcome = Literal["created", "existing", "restored", "revised", "stored"]


@dataclass(frozen=True)
class MemoryStoreInfo:
    memory_store_id: str
    name: str
    tags: Annotated[dict[str, str], Described("Every memory of the store carries them.")]
    memory_count: Annotated[int, Described("Memories in the store (not forgotten).")]
    created_at: str


@dataclass(frozen=True)
class RememberResult:
    memory_id: str
    memory_store_id: str
    memory_store: Annotated[str, Described("The store's name.")]
    revision_id: str
    outcome: Annotated[
        Outcome,
        Described(
            "created; existing (this content was there: its id, new tags added); restored (it "
            "had been forgotten); revised (memory_id's content replaced); stored (a token "
            "without memory:read is not told which)."
        ),
    ]
    tags: Annotated[
        TagObject, Described("The memory's own tags (without memory:read: the tags you sent).")
    ]


@dataclass(frozen=True)
class ForgetResult:
    memory_id: str
    memory_store_id: str
    outcome: Annotated[
        Literal["forgotten", "already_forgotten"],
        Described("Gone from search (kept for audit)."),
    ]
    forgotten_at: Annotated[str, Described("ISO 8601 UTC.")]


@dataclass(frozen=True)
class MemoryInfo:
    memory_id: str
    memory_store_id: str
    memory_store: str
    status: Literal["published", "forgotten"]
    content: str
    source: str | None
    tags: TagObject
    created_at: str
    updated_at: str
    revision_id: str
    revision_number: int


# ------------------------------------------------------------------ stores


@holding_lock
def create_memory_store(
    workspace: Workspace,
    principal: Principal,
    name: str,
    *,
    tags: Mapping[str, str] | None = None,
) -> MemoryStoreInfo:
    """A new memory store of the principal's tenant. A name the tenant already uses (for a
    store or a knowledge base) is an `InvalidRequest`."""
    principal.require(MEMORY_WRITE)
    clean = collection_name(name, "memory store")
    store_tags = check_tags(tags, "tags") if tags else {}
    store, conn = workspace.store, workspace.conn
    with store.write_transaction(conn):
        # Several servers on one PostgreSQL database: the name stays free until this commits.
        store.memories.lock_stores(conn, principal.tenant_id)
        if _find_store_by_name(store, conn, principal, clean) is not None:
            raise InvalidRequest(
                f"a memory store named {clean!r} already exists",
                details={"argument": "name", "value": clean},
            )
        store.catalog.ensure_knowledge_base(
            conn, _tenant(principal), clean, kind=MEMORIES, tags=store_tags
        )
    return next(info for info in _stores(store, conn, principal) if info.name == clean)


def list_memory_stores(workspace: Workspace, principal: Principal) -> list[MemoryStoreInfo]:
    principal.require(MEMORY_READ)
    return _stores(workspace.store, workspace.conn, principal)


# ------------------------------------------------------------------ remember / forget


def remember(
    workspace: Workspace,
    principal: Principal,
    content: Any,
    *,
    memory_store_id: Any = None,
    tags: Mapping[str, str] | None = None,
    source: str | None = None,
    memory_id: Any = None,
) -> RememberResult:
    """Store `content` as a memory in the store `memory_store_id` (default: the tenant's
    'memories' store, created on first use). It is an id (mst_...), as the tool's schema says: a
    name is `invalid_request` (the CLI resolves names first, `resolve_memory_stores`). The same
    content in the same store is the same memory: its id is returned (outcome 'existing', or
    'restored' when it had been forgotten), the given tags are added to its own, and nothing is
    duplicated.

    With `memory_id`, that memory's content is replaced instead (outcome 'revised'): a new
    immutable revision under the same id, in its own store; older revisions stay readable.

    A principal without memory:read gets outcome 'stored' and only the tags it sent, whatever
    was stored before (module docstring)."""
    # The write path of documents: imported here, so reading commands (`kbmcp memory --help`,
    # listing) do not load the ingest pipeline's parsers.
    from kbmcp.service.ingest_write import DocumentChanged, sha256

    principal.require(MEMORY_WRITE)
    blind = MEMORY_READ not in principal.scopes
    text = _content(content)
    given_tags = check_tags(tags, "tags") if tags is not None else {}
    given_source = _source(source)
    revised = None if memory_id is None else check_id("memory", memory_id, argument="memory_id")
    store_id = (
        None
        if memory_store_id is None
        else check_id("memory_store", memory_store_id, argument="memory_store_id")
    )
    if revised is not None and store_id is not None:
        raise InvalidRequest(
            "memory_store_id: a revised memory stays in its store; pass memory_id alone",
            details={"argument": "memory_store_id"},
        )
    spans = chunk_document(text, MEMORY_FORMAT, CHUNKING)
    workspace.ensure_model()
    # Without memory:read the text is embedded whether or not it is stored already, so the
    # answer's timing does not tell (a new memory uses these vectors; nothing is embedded twice).
    vectors = _embed(workspace, "", spans) if blind else None
    memory = _MemoryToWrite(text, sha256(text), spans, given_tags, given_source, vectors)
    # What is stored is read first and the write decides from it; another process (a second
    # server on one PostgreSQL database, a CLI beside a server) may write the same memory in
    # between. The write then finds it changed and writes nothing (IngestBatch `strict`), and
    # the memory is read again: the same content remembered twice at once is one memory, the
    # second answer 'existing' with both callers' tags. On PostgreSQL the UNIQUE
    # (knowledge_base_id, path) constraint decides which insert of a new memory wins.
    for _ in range(WRITE_ATTEMPTS):
        try:
            return _remember(workspace, principal, memory, store_id, revised, blind)
        except DocumentChanged:
            continue
    raise StoreError(
        f"the memory was changed by other writers {WRITE_ATTEMPTS} times while it was being "
        "written; nothing was written by this call: run it again",
        details={"argument": "content"},
    )


@dataclass(frozen=True)
class _MemoryToWrite:
    text: str
    content_hash: str
    spans: list[ChunkSpan]
    tags: dict[str, str]  # as given
    source: str | None  # as given
    vectors: list[bytes] | None  # computed beforehand (a caller without memory:read)


def _remember(
    workspace: Workspace,
    principal: Principal,
    memory: _MemoryToWrite,
    store_id: str | None,
    revised: str | None,
    blind: bool,
) -> RememberResult:
    """One attempt of `remember`: read what is stored, write what changes (DocumentChanged
    when another writer changed it in between)."""
    from kbmcp.ingest.parsing import ParsedDocument
    from kbmcp.service.ingest import pending_document
    from kbmcp.service.ingest_batch import IngestBatch, KnownDocument

    backend = workspace.store
    with workspace.lock:
        conn = workspace.conn
        if revised is None:
            store = _store_for_write(backend, conn, principal, store_id)
            target = None
        else:
            store, target = _memory_to_revise(backend, conn, principal, revised)
        # One snapshot for "is this content stored?" and "which id is free?": between two
        # separate reads another writer could commit the same new memory, whose id this call
        # would then find taken and pass over, writing the content a second time under the
        # next id. In one snapshot it either sees that memory (and answers 'existing') or
        # picks the same id and loses the insert (DocumentChanged: read again).
        with backend.read_snapshot(conn):
            same = backend.memories.same_content(conn, store.id, memory.content_hash)
            if target is not None and same is not None and same.public_id != target.public_id:
                if not blind:
                    raise _already_held(same.public_id, target.public_id)
                # A caller that cannot read memories must get the same answer whether or not
                # another memory holds this text (a refusal here told it, one guess at a
                # time, what the store held): the revision is written, and two memories of
                # the store hold one text.
                same = None
            known = target or same
            path = known.public_id if known else _new_memory_id(backend, conn, store, memory)
    merged = sorted(memory.tags.items())
    source = memory.source
    previous = None
    if known is not None:
        previous = KnownDocument(
            "", known.status, known.source, known.attributes_hash, known.revision_id,
            known.content_hash,
        )  # fmt: skip
        merged = sorted({*known.tags, *memory.tags.items()})
        source = source if source is not None else known.source
    parsed = ParsedDocument(kind=MEMORY_FORMAT, title="", tags=merged)
    pending = pending_document(
        path, source, memory.text, parsed, merged, {}, previous, CHUNKING, memory.vectors,
        memory.spans,
    )  # fmt: skip
    if pending is not None:
        # A memory's path is its id (made by _new_memory_id).
        batch = IngestBatch(
            workspace, store, Counter(), public_id_of=lambda path: path, strict=True
        )
        batch.queue(pending)
        batch.flush()
    with workspace.lock:
        written = backend.memories.own_memory(workspace.conn, principal.tenant_id, path)
    assert written is not None
    if blind:
        return RememberResult(
            path, store.public_id, store.name, written.revision_id or "", "stored",
            tag_object(memory.tags.items()),
        )  # fmt: skip
    return RememberResult(
        path, store.public_id, store.name, written.revision_id or "", _outcome(known, same),
        tag_object(merged),
    )  # fmt: skip


def _embed(workspace: Workspace, title: str, spans: Sequence[ChunkSpan]) -> list[bytes]:
    inputs = [chunk_embedding_input(title, span.heading_path, span.text) for span in spans]
    return [to_blob(row) for row in workspace.embedder.embed(inputs)]


def _already_held(held_by: str, target: str) -> InvalidRequest:
    """Revising `target` to the text another memory of its store holds (a caller that can read
    memories; one that cannot is never refused for it)."""
    return InvalidRequest(
        f"memory {held_by} of this store already holds this content; forget {target} instead "
        "of making a second copy",
        details={"argument": "content", "memory_id": held_by},
    )


def _outcome(known: MemoryState | None, same: MemoryState | None) -> Outcome:
    if known is None:
        return "created"
    if same is None:
        return "revised"  # a memory_id whose content changed
    return "existing" if known.status == "published" else "restored"


def _memory_to_revise(
    store: Store, conn: Connection, principal: Principal, memory_id: str
) -> tuple[KnowledgeBaseRef, MemoryState]:
    found = store.memories.memory_state(conn, principal.tenant_id, memory_id)
    if found is None:
        raise _not_own(memory_id)
    ref = KnowledgeBaseRef(found.store_id, found.store_public_id, found.store_name, MEMORIES)
    return ref, found.state


@holding_lock
def forget(workspace: Workspace, principal: Principal, memory_id: Any) -> ForgetResult:
    """Take a memory out of search at once; its rows stay (status 'archived') for audit.
    Forgetting a forgotten memory changes nothing (outcome 'already_forgotten')."""
    principal.require(MEMORY_WRITE)
    if memory_id is None:
        raise InvalidRequest(
            "memory_id is required: the id (mem_...) of the memory to forget",
            details={"argument": "memory_id"},
        )
    public_id = check_id("memory", memory_id, argument="memory_id")
    store, conn = workspace.store, workspace.conn
    memory = _own_memory(store, conn, principal, public_id)
    if memory.status != "published":
        return ForgetResult(
            public_id, memory.store_public_id, "already_forgotten", memory.updated_at
        )
    from kbmcp.service.ingest import archive_row  # the ingest pipeline: only when writing

    archive_row(workspace, memory.id)
    forgotten_at = _own_memory(store, conn, principal, public_id).updated_at
    return ForgetResult(public_id, memory.store_public_id, "forgotten", forgotten_at)


def list_memories(
    workspace: Workspace,
    principal: Principal,
    *,
    memory_store: str | None = None,
    include_forgotten: bool = False,
    limit: int = DEFAULT_LIST,
) -> list[MemoryInfo]:
    """The tenant's memories, most recently updated first; with `include_forgotten`, forgotten
    ones too (status 'forgotten')."""
    principal.require(MEMORY_READ)
    limit = integer(limit, "limit", 1, MAX_LIST)
    store, conn = workspace.store, workspace.conn
    store_id = None
    if memory_store is not None:
        store_id = _existing_store(store, conn, principal, memory_store).id
    rows = store.memories.memories(
        conn,
        principal.tenant_id,
        store_id=store_id,
        include_forgotten=bool(include_forgotten),
        limit=limit,
    )
    return [
        MemoryInfo(
            memory_id=row.memory_id,
            memory_store_id=row.store_public_id,
            memory_store=row.store_name,
            status="published" if row.status == "published" else "forgotten",
            content=row.content,
            source=row.source,
            tags=tag_object(row.tags),
            created_at=row.created_at,
            updated_at=row.updated_at,
            revision_id=row.revision_id,
            revision_number=row.revision_number,
        )
        for row in rows
    ]


def resolve_memory_stores(
    workspace: Workspace, principal: Principal, names_or_ids: Sequence[str]
) -> list[str]:
    """Public ids of the tenant's memory stores given by name or id (CLI convenience); an
    unknown one is `resource_unavailable`."""
    principal.require(MEMORY_READ)
    store, conn = workspace.store, workspace.conn
    found = [
        _existing_store(store, conn, principal, ref, "--store").public_id for ref in names_or_ids
    ]
    return list(dict.fromkeys(found))


# ------------------------------------------------------------------ checks and lookups


def check_tags(values: Any, argument: str) -> dict[str, str]:
    """Tags as given to a memory or a store: an object of non-empty string keys and string
    values, at most MAX_TAGS pairs."""
    if not isinstance(values, Mapping):
        raise InvalidRequest(
            f"{argument} must be an object of key/value pairs", details={"argument": argument}
        )
    if len(values) > MAX_TAGS:
        raise InvalidRequest(
            f"{argument} accepts at most {MAX_TAGS} pairs", details={"argument": argument}
        )
    tags = {}
    for key, value in values.items():
        if (
            not isinstance(key, str)
            or not key.strip()
            or not isinstance(value, str)
            or not (storable(key) and storable(value))
        ):
            raise InvalidRequest(
                f"{argument}: keys must be non-empty strings and values strings "
                f"(got {shown(key)}: {shown(value)})",
                details={"argument": argument, "key": key},
            )
        tags[key.strip()] = value.strip()
    return tags


def _content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidRequest(
            "content must be non-empty text (the fact to remember)",
            details={"argument": "content"},
        )
    if not storable(content):
        raise InvalidRequest(
            "content holds a NUL character or an unpaired surrogate, which no stored text can",
            details={"argument": "content"},
        )
    text = content.strip()
    if len(text) > MAX_MEMORY_CHARS:
        raise InvalidRequest(
            f"content is {len(text)} characters; a memory holds at most {MAX_MEMORY_CHARS} "
            "(add long text as a document with `kbmcp add`)",
            details={"argument": "content", "limit": MAX_MEMORY_CHARS},
        )
    return text


def _source(source: Any) -> str | None:
    if source is None:
        return None
    if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS or not storable(source):
        raise InvalidRequest(
            f"source must be text of at most {MAX_SOURCE_CHARS} characters (got {shown(source)})",
            details={"argument": "source"},
        )
    return source.strip() or None


def _tenant(principal: Principal) -> TenantRef:
    return TenantRef(principal.tenant_id, principal.tenant_public_id)


def _stores(store: Store, conn: Connection, principal: Principal) -> list[MemoryStoreInfo]:
    return [
        MemoryStoreInfo(
            row.public_id, row.name, json.loads(row.tags), row.memory_count, row.created_at
        )
        for row in store.memories.stores(conn, principal.tenant_id)
    ]


def _store_refs(store: Store, conn: Connection, principal: Principal) -> list[KnowledgeBaseRef]:
    return [
        KnowledgeBaseRef(row.id, row.public_id, row.name, MEMORIES)
        for row in store.memories.stores(conn, principal.tenant_id)
    ]


def _find_store_by_name(
    store: Store, conn: Connection, principal: Principal, name: str
) -> KnowledgeBaseRef | None:
    refs = _store_refs(store, conn, principal)
    return next((ref for ref in refs if ref.name == name), None)


def _existing_store(
    store: Store,
    conn: Connection,
    principal: Principal,
    ref: str,
    argument: str = "memory_store_id",
) -> KnowledgeBaseRef:
    """The tenant's memory store with this id (mst_...) or name; else `ResourceUnavailable`."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidRequest(f"{argument} must be a store id", details={"argument": argument})
    key = ref.strip()
    for found in _store_refs(store, conn, principal):
        if key in (found.public_id, found.name):
            return found
    raise ResourceUnavailable(
        f"{argument}: no memory store of this tenant is named or has the id {key!r}",
        details={"argument": argument, "value": key},
    )


def _store_for_write(
    store: Store, conn: Connection, principal: Principal, store_id: str | None
) -> KnowledgeBaseRef:
    """The store a memory goes to: the tenant's store with this id (mst_..., checked), or the
    default store (created if new; by one server of several: ensure_knowledge_base)."""
    if store_id is not None:
        refs = _store_refs(store, conn, principal)
        found = [ref for ref in refs if ref.public_id == store_id]
        if not found:
            raise ResourceUnavailable(
                f"memory_store_id: no memory store {store_id} of this tenant",
                details={"argument": "memory_store_id", "value": store_id},
            )
        return found[0]
    with store.write_transaction(conn):
        return store.catalog.ensure_knowledge_base(
            conn, _tenant(principal), DEFAULT_STORE, kind=MEMORIES
        )


def _new_memory_id(
    store: Store, conn: Connection, memories_store: KnowledgeBaseRef, memory: _MemoryToWrite
) -> str:
    """A deterministic id from the store and the content, keyed with the database's id key (so
    it reveals nothing of the content). The next candidate is taken only when a memory that was
    first written with this content has been revised since."""
    ids = store.id_key.id_key_of(conn)
    attempt = 0
    while True:
        public_id = ids.make("memory", memories_store.public_id, memory.content_hash, attempt)
        if not store.catalog.document_id_taken(conn, public_id):
            return public_id
        attempt += 1


def _own_memory(store: Store, conn: Connection, principal: Principal, public_id: str) -> OwnMemory:
    """The tenant's memory `public_id`; else `ResourceUnavailable` (another tenant's memory is
    indistinguishable from a missing one)."""
    found = store.memories.own_memory(conn, principal.tenant_id, public_id)
    if found is None:
        raise _not_own(public_id)
    return found


def _not_own(public_id: str) -> ResourceUnavailable:
    return ResourceUnavailable(
        f"memory {public_id} does not exist or is not this tenant's",
        details={"argument": "memory_id", "memory_id": public_id},
    )
