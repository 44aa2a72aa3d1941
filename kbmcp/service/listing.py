"""Listing knowledge bases and documents the principal can read."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from kbmcp.access import READ, Principal, Readable, readable_kb_ids
from kbmcp.described import Described
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.search.models import SearchFilters
from kbmcp.search.scope import resolve_scope
from kbmcp.store.listing import DocumentCursor
from kbmcp.tags import Tags, tag_object
from kbmcp.validate import integer, shown, storable
from kbmcp.workspace import Workspace

DEFAULT_PAGE = 50
MAX_PAGE = 200


@dataclass(frozen=True)
class KnowledgeBaseInfo:
    knowledge_base_id: str
    name: str
    description: str
    tags: dict[str, str]
    document_count: Annotated[int, Described("Published documents.")]
    chunk_count: Annotated[int, Described("Searchable chunks.")]
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class DocumentInfo:
    document_id: str
    knowledge_base_id: str
    path: str
    title: str
    status: str
    current_revision_id: str | None
    revision_number: int | None
    size_chars: int
    updated_at: str
    tags: Tags
    metadata: dict[str, object]


@dataclass(frozen=True)
class DocumentPage:
    documents: Annotated[list[DocumentInfo], Described("Most recently updated first.")]
    next_cursor: Annotated[
        str | None, Described("Pass as cursor for the next page; null at the end.")
    ]


def list_knowledge_bases(workspace: Workspace, principal: Principal) -> list[KnowledgeBaseInfo]:
    principal.require(READ)
    store, conn = workspace.store, workspace.conn
    rows = store.listing.knowledge_bases(conn, readable_kb_ids(store, conn, principal))
    return [
        KnowledgeBaseInfo(
            knowledge_base_id=row.public_id,
            name=row.name,
            description=row.description,
            tags=json.loads(row.tags),
            document_count=row.documents,
            chunk_count=row.chunks,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )
        for row in rows
    ]


def list_documents(
    workspace: Workspace,
    principal: Principal,
    *,
    knowledge_base_ids: Sequence[str] | None = None,
    path_prefix: str | None = None,
    tags: Mapping[str, str] | None = None,
    include_archived: bool = False,
    cursor: str | None = None,
    limit: int = DEFAULT_PAGE,
) -> DocumentPage:
    principal.require(READ)
    limit = integer(limit, "limit", 1, MAX_PAGE)
    if path_prefix is not None and (
        not isinstance(path_prefix, str) or not path_prefix.strip() or not storable(path_prefix)
    ):
        raise InvalidRequest(
            f"path_prefix must be a non-empty string (got {shown(path_prefix)})",
            details={"argument": "path_prefix"},
        )
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidRequest(
            "cursor is not a cursor returned by list_documents", details={"argument": "cursor"}
        )
    after = _decode_cursor(cursor) if cursor else None
    store, conn = workspace.store, workspace.conn
    # An empty knowledge_base_ids list is an error there, never "every knowledge base".
    filters = SearchFilters(
        knowledge_base_ids=None if knowledge_base_ids is None else list(knowledge_base_ids),
        document_paths=[path_prefix] if path_prefix else None,
        tags=tags if tags else None,  # validated with the scope (a Mapping, or invalid_request)
    )
    # Documents only: memories are listed by kbmcp.service.memories.
    can_read = Readable(readable_kb_ids(store, conn, principal), None)
    scope = resolve_scope(store, conn, can_read, filters)
    rows = store.listing.documents(
        conn, scope, include_archived=include_archived, after=after, limit=limit + 1
    )
    documents = [
        DocumentInfo(
            document_id=row.public_id,
            knowledge_base_id=row.knowledge_base_id,
            path=row.path,
            title=row.title,
            status=row.status,
            current_revision_id=row.revision_id,
            revision_number=row.revision_number,
            size_chars=row.char_count or 0,
            updated_at=row.updated_at,
            tags=tag_object(row.tags),
            metadata=json.loads(row.metadata),
        )
        for row in rows[:limit]
    ]
    next_cursor = None
    if len(rows) > limit:
        last = documents[-1]
        next_cursor = _encode_cursor(last.updated_at, last.document_id)
    return DocumentPage(documents, next_cursor)


def _encode_cursor(updated_at: str, document_id: str) -> str:
    raw = json.dumps([updated_at, document_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> DocumentCursor:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        updated_at, document_id = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(updated_at, str) or not isinstance(document_id, str):
            raise ValueError
        # Never in a cursor made here, and no database text holds them: NUL, lone surrogates.
        if "\x00" in updated_at + document_id:
            raise ValueError
        (updated_at + document_id).encode()
    except (ValueError, TypeError):  # (UnicodeError is a ValueError)
        raise InvalidRequest(
            "cursor is not a cursor returned by list_documents", details={"argument": "cursor"}
        ) from None
    return DocumentCursor(updated_at, document_id)


def resolve_knowledge_bases(
    workspace: Workspace, principal: Principal, names_or_ids: Sequence[str]
) -> list[str]:
    """Public ids for knowledge bases given by name or id (CLI convenience); unknown ones are a
    `resource_unavailable` error naming them."""
    readable = list_knowledge_bases(workspace, principal)
    by_name = {kb.name: kb.knowledge_base_id for kb in readable}
    ids = {kb.knowledge_base_id for kb in readable}
    resolved, unknown = [], []
    for item in names_or_ids:
        key = item.strip()
        if key in ids:
            resolved.append(key)
        elif key in by_name:
            resolved.append(by_name[key])
        else:
            unknown.append(item)
    if unknown:
        raise ResourceUnavailable(
            f"no readable knowledge base named or with id: {', '.join(map(repr, unknown))}",
            details={"knowledge_bases": unknown},
        )
    return list(dict.fromkeys(resolved))
