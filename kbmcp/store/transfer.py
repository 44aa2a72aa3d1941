"""The transfer concern of the store contract: what `kbmcp export` reads and `kbmcp import`
writes besides the catalog's documents, revisions and chunks (kbmcp/service/transfer/).

Reads come in a stable order that does not depend on row ids (stores by public id, documents by
path in byte order, revisions by number, chunks by ordinal, tenants by name), so the same data
exports to the same bytes from either backend. Documents are read a page at a time (`limit`),
so an export holds one page and one revision's text in memory, whatever the size. A revision
that is still being written (a staged revision, kbmcp/service/ingest_write.py) is not part of
the data yet and is never read.

The logic is written once (`SqlTransfer`); each backend gives its statements and dialect
(kbmcp/store/sqlite/transfer.py, kbmcp/store/postgres/transfer.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect


@dataclass(frozen=True)
class TenantRow:
    id: int
    public_id: str
    name: str
    created_at: str


@dataclass(frozen=True)
class StoreRow:
    """A knowledge base or memory store (kind)."""

    id: int
    public_id: str
    tenant: str  # the owner's name
    name: str
    description: str
    tags: dict[str, str]
    kind: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class DocumentRow:
    id: int
    public_id: str
    path: str
    title: str
    kind: str
    source: str | None
    metadata: dict[str, Any]
    status: str
    current_revision: str  # its public id
    attributes_hash: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class RevisionRow:
    id: int
    public_id: str
    number: int
    content: str
    content_hash: str
    char_count: int
    line_count: int
    created_at: str


@dataclass(frozen=True)
class ChunkRow:
    public_id: str
    ordinal: int
    heading_path: list[str]
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    text: str


@dataclass(frozen=True)
class ShareRow:
    knowledge_base: str  # public id
    tenant: str  # the grantee's name
    shared_at: str
    revoked_at: str | None


class Transfer(Protocol):
    # ---------------------------------------------------------------- export

    def tenants(self, conn: Connection) -> list[TenantRow]:
        """Every tenant, by name."""
        ...

    def stores(self, conn: Connection) -> list[StoreRow]:
        """Every knowledge base and memory store, by public id."""
        ...

    def documents(
        self, conn: Connection, store_id: int, after_path: str | None, limit: int
    ) -> list[DocumentRow]:
        """The next `limit` documents of a store with a current revision, by path (byte
        order) after `after_path`."""
        ...

    def document_tags(
        self, conn: Connection, store_id: int, document_id: int
    ) -> list[tuple[str, str]]:
        """A document's tags, by key then value (`store_id`: its store, which every read of a
        store's rows names: on PostgreSQL the key the tables are distributed by)."""
        ...

    def revisions(self, conn: Connection, store_id: int, document_id: int) -> list[RevisionRow]:
        """A document's revisions (not one still being written), by number."""
        ...

    def chunks(self, conn: Connection, store_id: int, revision_id: int) -> list[ChunkRow]: ...

    def stored_vectors(
        self, conn: Connection, store_id: int, revision_id: int
    ) -> list[tuple[str, bytes]]:
        """(chunk public id, little-endian float32 vector) of the revision's chunks that
        have a stored vector, by ordinal."""
        ...

    def shares(self, conn: Connection, store_ids: Sequence[int]) -> list[ShareRow]:
        """The shares of these knowledge bases, by knowledge base then grantee."""
        ...

    # ---------------------------------------------------------------- import

    def taken_ids(self, conn: Connection, table: str, public_ids: Sequence[str]) -> set[str]:
        """Which of `public_ids` a row of `table` (tenant, knowledge_base, document,
        revision, chunk) already has."""
        ...

    def store_exists(self, conn: Connection, tenant: str, name: str) -> bool:
        """Whether the tenant named `tenant` has a knowledge base or memory store `name`."""
        ...

    def insert_tenant(
        self, conn: Connection, public_id: str, name: str, created_at: str
    ) -> int: ...

    def insert_store(
        self, conn: Connection, store: StoreRow, tenant_id: int, public_id: str
    ) -> int:
        """Insert a knowledge base or memory store with `store`'s attributes and times."""
        ...


class SqlTransfer:
    """`Transfer` over a backend's dialect and statements: STATEMENTS in its parameter style
    (`statements`), plus SELECT_SHARES and SELECT_TAKEN, which pass a list of ids."""

    TAKEN_TABLES = frozenset({"tenant", "knowledge_base", "document", "revision", "chunk"})

    def __init__(self, dialect: Dialect, sql: dict[str, str]) -> None:
        self.dialect = dialect
        self.SELECT_TENANTS = sql["SELECT_TENANTS"]
        self.SELECT_STORES = sql["SELECT_STORES"]
        self.SELECT_DOCUMENTS = sql["SELECT_DOCUMENTS"]
        self.SELECT_DOCUMENT_TAGS = sql["SELECT_DOCUMENT_TAGS"]
        self.SELECT_REVISIONS = sql["SELECT_REVISIONS"]
        self.SELECT_CHUNKS = sql["SELECT_CHUNKS"]
        self.SELECT_STORED_VECTORS = sql["SELECT_STORED_VECTORS"]
        self.SELECT_SHARES = sql["SELECT_SHARES"]
        # {table}: one of TAKEN_TABLES (never a caller's text)
        self.SELECT_TAKEN = sql["SELECT_TAKEN"]
        self.SELECT_STORE_EXISTS = sql["SELECT_STORE_EXISTS"]
        self.INSERT_TENANT = sql["INSERT_TENANT"]
        self.INSERT_STORE = sql["INSERT_STORE"]

    def tenants(self, conn: Connection) -> list[TenantRow]:
        return [TenantRow(*row) for row in conn.execute(self.SELECT_TENANTS)]

    def stores(self, conn: Connection) -> list[StoreRow]:
        return [
            StoreRow(id, public_id, tenant, name, description, _json(tags), kind, created, updated)
            for id, public_id, tenant, name, description, tags, kind, created, updated in (
                conn.execute(self.SELECT_STORES)
            )
        ]

    def documents(
        self, conn: Connection, store_id: int, after_path: str | None, limit: int
    ) -> list[DocumentRow]:
        rows = conn.execute(
            self.SELECT_DOCUMENTS, {"store_id": store_id, "after": after_path, "limit": limit}
        )
        return [
            DocumentRow(*row[:6], _json(row[6]), *row[7:])  # type: ignore[misc]
            for row in rows
        ]

    def document_tags(
        self, conn: Connection, store_id: int, document_id: int
    ) -> list[tuple[str, str]]:
        rows = conn.execute(
            self.SELECT_DOCUMENT_TAGS, {"store_id": store_id, "document_id": document_id}
        )
        return [(key, value) for key, value in rows]

    def revisions(self, conn: Connection, store_id: int, document_id: int) -> list[RevisionRow]:
        rows = conn.execute(
            self.SELECT_REVISIONS, {"store_id": store_id, "document_id": document_id}
        )
        return [RevisionRow(*row) for row in rows]

    def chunks(self, conn: Connection, store_id: int, revision_id: int) -> list[ChunkRow]:
        rows = conn.execute(self.SELECT_CHUNKS, {"store_id": store_id, "revision_id": revision_id})
        return [ChunkRow(row[0], row[1], _json(row[2]), *row[3:]) for row in rows]

    def stored_vectors(
        self, conn: Connection, store_id: int, revision_id: int
    ) -> list[tuple[str, bytes]]:
        rows = conn.execute(
            self.SELECT_STORED_VECTORS, {"store_id": store_id, "revision_id": revision_id}
        )
        return [(chunk_id, bytes(embedding)) for chunk_id, embedding in rows]

    def shares(self, conn: Connection, store_ids: Sequence[int]) -> list[ShareRow]:
        rows = conn.execute(self.SELECT_SHARES, {"ids": self.dialect.list_param(store_ids)})
        return [ShareRow(*row) for row in rows]

    def taken_ids(self, conn: Connection, table: str, public_ids: Sequence[str]) -> set[str]:
        if table not in self.TAKEN_TABLES:
            raise ValueError(f"not a table with public ids: {table}")
        sql = self.SELECT_TAKEN.format(table=table)
        found = conn.execute(sql, {"ids": self.dialect.list_param(list(public_ids))})
        return {public_id for (public_id,) in found}

    def store_exists(self, conn: Connection, tenant: str, name: str) -> bool:
        row = conn.execute(self.SELECT_STORE_EXISTS, {"tenant": tenant, "name": name})
        return row.fetchone() is not None

    def insert_tenant(self, conn: Connection, public_id: str, name: str, created_at: str) -> int:
        params = {"public_id": public_id, "name": name, "created_at": created_at}
        tenant_id = self.dialect.insert(conn, self.INSERT_TENANT, params)
        assert tenant_id is not None  # the statement has no ON CONFLICT
        return tenant_id

    def insert_store(
        self, conn: Connection, store: StoreRow, tenant_id: int, public_id: str
    ) -> int:
        store_id = self.dialect.insert(
            conn,
            self.INSERT_STORE,
            {
                "public_id": public_id,
                "tenant_id": tenant_id,
                "name": store.name,
                "description": store.description,
                "tags": json.dumps(store.tags, ensure_ascii=False),
                "kind": store.kind,
                "created_at": store.created_at,
                "updated_at": store.updated_at,
            },
        )
        assert store_id is not None  # the statement has no ON CONFLICT
        return store_id


def _json(value: Any) -> Any:
    """A JSON column's value: SQLite returns the stored text, psycopg parses `json` columns."""
    return json.loads(value) if isinstance(value, str) else value


# The statements both backends share, in each one's parameter style: `{p}` becomes a named
# parameter, `{c}` the collation that makes text sort in byte order (SQLite's default; on
# PostgreSQL "C", whatever the database's locale).
STATEMENTS = {
    "SELECT_TENANTS": "SELECT id, public_id, name, created_at FROM tenant ORDER BY name {c}",
    "SELECT_STORES": """
        SELECT kb.id, kb.public_id, t.name, kb.name, kb.description, kb.tags, kb.kind,
               kb.created_at, kb.updated_at
        FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id
        ORDER BY kb.public_id {c}""",
    # A document whose first revision is still being written has no current revision yet.
    "SELECT_DOCUMENTS": """
        SELECT d.id, d.public_id, d.path, d.title, d.kind, d.source, d.metadata, d.status,
               r.public_id, d.attributes_hash, d.created_at, d.updated_at
        FROM document AS d JOIN revision AS r ON r.id = d.current_revision_id
        WHERE d.knowledge_base_id = {store_id}
          AND ({after} IS NULL OR d.path {c} > {after})
        ORDER BY d.path {c}
        LIMIT {limit}""",
    "SELECT_DOCUMENT_TAGS": """
        SELECT key, value FROM document_tag WHERE document_id = {document_id}
        ORDER BY key {c}, value {c}""",
    "SELECT_REVISIONS": """
        SELECT r.id, r.public_id, r.number, r.content, r.content_hash, r.char_count,
               r.line_count, r.created_at
        FROM revision AS r
        WHERE r.document_id = {document_id}
          AND NOT EXISTS (SELECT 1 FROM staged_revision AS s WHERE s.revision_id = r.id)
        ORDER BY r.number""",
    "SELECT_CHUNKS": """
        SELECT public_id, ordinal, heading_path, char_start, char_end, line_start, line_end, text
        FROM chunk WHERE revision_id = {revision_id} ORDER BY ordinal""",
    "SELECT_STORED_VECTORS": """
        SELECT c.public_id, v.embedding
        FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
        WHERE c.revision_id = {revision_id}
        ORDER BY c.ordinal""",
    "SELECT_STORE_EXISTS": """
        SELECT 1 FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id
        WHERE t.name = {tenant} AND kb.name = {name}""",
    "INSERT_TENANT": """
        INSERT INTO tenant (public_id, name, created_at)
        VALUES ({public_id}, {name}, {created_at})""",
    "INSERT_STORE": """
        INSERT INTO knowledge_base (public_id, tenant_id, name, description, tags, kind,
                                    created_at, updated_at)
        VALUES ({public_id}, {tenant_id}, {name}, {description}, {tags}, {kind},
                {created_at}, {updated_at})""",
}
PARAMETERS = [
    "store_id",
    "after",
    "limit",
    "document_id",
    "revision_id",
    "tenant",
    "name",
    "public_id",
    "created_at",
    "tenant_id",
    "description",
    "tags",
    "kind",
    "updated_at",
]


def statements(
    parameter: str, collation: str, overrides: dict[str, str] | None = None
) -> dict[str, str]:
    """STATEMENTS in a backend's style: `parameter` formats a name (":{}" or "%({})s"),
    `overrides` replaces some names' placeholders (a cast the backend needs)."""
    names = {name: parameter.format(name) for name in PARAMETERS} | (overrides or {})
    return {key: sql.format(c=collation, **names) for key, sql in STATEMENTS.items()}
