"""The memories concern of the store contract: what `remember`, `forget` and the memory
listings read (kbmcp/service/memories.py). A memory store is a knowledge_base row of kind
'memories', a memory a document in it (migration 6), so memories are written by the document
write path (store.catalog, store.index, store.vectors through kbmcp/service/ingest_batch.py);
this concern holds the reads that are a memory's own, each limited to one tenant's stores.

Implemented by kbmcp/store/sqlite/memories.py and kbmcp/store/postgres/memories.py: their
statements under `SqlMemories`, the logic both share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect


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


class SqlMemories:
    """The memories concern (the `Memories` Protocol) over a backend's statements: a backend
    subclasses it with its statements (the upper-case class attributes, named parameters; each
    memory's tags a column of (key, value) pairs) and its dialect."""

    dialect: ClassVar[Dialect]

    SELECT_STORES: ClassVar[str]
    # None: the backend's write transaction already excludes every other writer.
    LOCK_TENANT: ClassVar[str | None]
    SELECT_SAME_CONTENT: ClassVar[str]
    SELECT_MEMORY_STATE: ClassVar[str]
    SELECT_OWN_MEMORY: ClassVar[str]
    SELECT_MEMORIES: ClassVar[str]

    def stores(self, conn: Connection, tenant_id: int) -> list[StoreRow]:
        return [
            StoreRow(*row) for row in conn.execute(self.SELECT_STORES, {"tenant_id": tenant_id})
        ]

    def lock_stores(self, conn: Connection, tenant_id: int) -> None:
        if self.LOCK_TENANT is not None:
            conn.execute(self.LOCK_TENANT, {"tenant_id": tenant_id})

    def same_content(
        self, conn: Connection, store_id: int, content_hash: str
    ) -> MemoryState | None:
        row = conn.execute(
            self.SELECT_SAME_CONTENT, {"content_hash": content_hash, "store_id": store_id}
        ).fetchone()
        return None if row is None else self._state(row)

    def memory_state(
        self, conn: Connection, tenant_id: int, memory_id: str
    ) -> RevisableMemory | None:
        row = conn.execute(
            self.SELECT_MEMORY_STATE, {"memory_id": memory_id, "tenant_id": tenant_id}
        ).fetchone()
        return None if row is None else RevisableMemory(self._state(row[:7]), *row[7:])

    def own_memory(self, conn: Connection, tenant_id: int, memory_id: str) -> OwnMemory | None:
        row = conn.execute(
            self.SELECT_OWN_MEMORY, {"memory_id": memory_id, "tenant_id": tenant_id}
        ).fetchone()
        return None if row is None else OwnMemory(*row)

    def memories(
        self,
        conn: Connection,
        tenant_id: int,
        *,
        store_id: int | None,
        include_forgotten: bool,
        limit: int,
    ) -> list[MemoryRow]:
        rows = conn.execute(
            self.SELECT_MEMORIES,
            {
                "tenant_id": tenant_id,
                "store_id": store_id,
                "include_forgotten": bool(include_forgotten),
                "limit": limit,
            },
        )
        return [MemoryRow(*row[:10], self.dialect.pairs(row[10])) for row in rows]

    def _state(self, row: Any) -> MemoryState:
        return MemoryState(*row[:6], self.dialect.pairs(row[6]))
