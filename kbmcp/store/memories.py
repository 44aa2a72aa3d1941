"""The memories concern of the store contract: what `remember`, `forget` and the memory
listings read (kbmcp/service/memories.py). A memory store is a knowledge_base row of kind
'memories', a memory a document in it (migration 6), so memories are written by the document
write path (store.catalog, store.index, store.vectors through kbmcp/service/ingest_batch.py);
this concern holds the reads that are a memory's own, each limited to one tenant's stores.

Implemented by kbmcp/store/sqlite/memories.py and kbmcp/store/postgres/memories.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection


@dataclass(frozen=True)
class StoreRow:
    id: int
    public_id: str
    name: str
    tags: str  # JSON text: {key: value}
    created_at: str
    memory_count: int  # published memories (forgotten ones are not counted)


@dataclass(frozen=True)
class MemoryState:
    """What `remember` needs to know of an existing memory."""

    public_id: str
    status: str
    source: str | None
    attributes_hash: str
    revision_id: int | None
    content_hash: str | None
    tags: list[tuple[str, str]]  # its own tags, in no set order


@dataclass(frozen=True)
class RevisableMemory:
    """A memory to revise, with its store."""

    state: MemoryState
    store_id: int
    store_public_id: str
    store_name: str


@dataclass(frozen=True)
class OwnMemory:
    id: int
    public_id: str
    status: str
    store_public_id: str
    updated_at: str
    revision_id: str | None  # the current revision's public id


@dataclass(frozen=True)
class MemoryRow:
    memory_id: str
    store_public_id: str
    store_name: str
    status: str
    content: str
    source: str | None
    created_at: str
    updated_at: str
    revision_id: str
    revision_number: int
    tags: list[tuple[str, str]]  # ordered by key, then value (byte order)


class Memories(Protocol):
    def stores(self, conn: Connection, tenant_id: int) -> list[StoreRow]:
        """The tenant's memory stores by name (byte order)."""
        ...

    def lock_stores(self, conn: Connection, tenant_id: int) -> None:
        """Inside a write transaction: no other transaction creates a store of the tenant until
        this one ends, so a name checked free stays free (SQLite: the single writer already)."""
        ...

    def same_content(
        self, conn: Connection, store_id: int, content_hash: str
    ) -> MemoryState | None:
        """A memory of the store whose current text has this hash, forgotten or not."""
        ...

    def memory_state(
        self, conn: Connection, tenant_id: int, memory_id: str
    ) -> RevisableMemory | None:
        """The tenant's memory with this public id, with its store; None for any other id."""
        ...

    def own_memory(self, conn: Connection, tenant_id: int, memory_id: str) -> OwnMemory | None:
        """The tenant's memory with this public id; None for any other id (another tenant's
        memory is indistinguishable from a missing one)."""
        ...

    def memories(
        self,
        conn: Connection,
        tenant_id: int,
        *,
        store_id: int | None,
        include_forgotten: bool,
        limit: int,
    ) -> list[MemoryRow]:
        """The tenant's memories (of one store when `store_id` is given), most recently updated
        first, then by public id (byte order); forgotten ones only with `include_forgotten`."""
        ...
