"""The listing concern of the store contract: the knowledge bases a principal can read, and a
page of the documents a scope selects (`kbmcp ls`, the list tools).

Implemented by kbmcp/store/sqlite/listing.py and kbmcp/store/postgres/listing.py (their
statements under `SqlListing`, the logic both share); used by
kbmcp/service/listing.py. The documents come from the backend's scope SQL (the search
engine's), so listing, search and scan validate and apply knowledge bases, path prefixes and
tags the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.search.resolved import Scope
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect
    from kbmcp.store.search import ScopeSql


@dataclass(frozen=True)
class KnowledgeBaseRow:
    public_id: str
    name: str
    description: str
    tags: str  # JSON text: {key: value}
    created_at: str
    updated_at: str
    documents: int  # published documents
    chunks: int  # searchable chunks


@dataclass(frozen=True)
class DocumentRow:
    public_id: str
    knowledge_base_id: str  # public id
    path: str
    title: str
    status: str
    revision_id: str | None  # None: a document written in parts and not switched in yet
    revision_number: int | None
    char_count: int | None
    updated_at: str
    metadata: str  # JSON text
    tags: list[tuple[str, str]]  # ordered by key, then value (byte order)


@dataclass(frozen=True)
class DocumentCursor:
    """Where a page starts: after the document (updated_at, public_id) in the listing's order
    (updated_at descending, then public_id ascending, both in byte order)."""

    updated_at: str
    document_id: str


class Listing(Protocol):
    def knowledge_bases(
        self, conn: Connection, readable_kb_ids: list[int]
    ) -> list[KnowledgeBaseRow]:
        """The knowledge bases among `readable_kb_ids` by name, then public id (byte order)."""
        ...

    def documents(
        self,
        conn: Connection,
        scope: Scope,
        *,
        include_archived: bool,
        after: DocumentCursor | None,
        limit: int,
    ) -> list[DocumentRow]:
        """At most `limit` documents of the scope (with `include_archived`, archived ones too),
        most recently updated first, then by public id; keyset pagination: only those after
        `after`."""
        ...


class SqlListing:
    """Listing (the `Listing` Protocol) over a backend's statements: SELECT_KNOWLEDGE_BASES
    (the readable ids one parameter, the dialect's id list) and SELECT_DOCUMENTS, formatted with
    the scope's documents ({documents}, the backend's scope SQL); its tags a column of pairs."""

    dialect: ClassVar[Dialect]
    scope_sql: ClassVar[ScopeSql]

    SELECT_KNOWLEDGE_BASES: ClassVar[str]
    SELECT_DOCUMENTS: ClassVar[str]

    def knowledge_bases(
        self, conn: Connection, readable_kb_ids: list[int]
    ) -> list[KnowledgeBaseRow]:
        rows = conn.execute(
            self.SELECT_KNOWLEDGE_BASES,
            {"readable_kb_ids": self.dialect.list_param(readable_kb_ids)},
        )
        return [KnowledgeBaseRow(*row) for row in rows]

    def documents(
        self,
        conn: Connection,
        scope: Scope,
        *,
        include_archived: bool,
        after: DocumentCursor | None,
        limit: int,
    ) -> list[DocumentRow]:
        documents = self.scope_sql.documents_sql(scope, include_archived=include_archived)
        rows = conn.execute(
            self.SELECT_DOCUMENTS.format(documents=documents),
            {
                **self.scope_sql.scope_params(scope),
                "cursor_updated": None if after is None else after.updated_at,
                "cursor_id": None if after is None else after.document_id,
                "limit": limit,
            },
        )
        return [DocumentRow(*row[:10], self.dialect.pairs(row[10])) for row in rows]
