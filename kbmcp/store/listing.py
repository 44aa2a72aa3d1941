"""The listing concern of the store contract: the knowledge bases a principal can read, and a
page of the documents a scope selects (`kbmcp ls`, the list tools).

Implemented by kbmcp/store/sqlite/listing.py and kbmcp/store/postgres/listing.py; used by
kbmcp/service/listing.py. The documents come from the backend's scope SQL (the search
engine's), so listing, search and scan validate and apply knowledge bases, path prefixes and
tags the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kbmcp.search.scope import Scope
    from kbmcp.store.backend import Connection


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
