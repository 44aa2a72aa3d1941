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
from kbmcp.store.sqlite.search.scope import documents_sql, scope_params
from kbmcp.validate import integer, shown
from kbmcp.workspace import Workspace

DEFAULT_PAGE = 50
MAX_PAGE = 200

SELECT_KNOWLEDGE_BASES = """
SELECT kb.public_id, kb.name, kb.description, kb.tags, kb.created_at, kb.updated_at,
       (SELECT count(*) FROM document AS d
        WHERE d.knowledge_base_id = kb.id AND d.status = 'published') AS documents,
       (SELECT count(*) FROM indexed_chunk AS i WHERE i.knowledge_base_id = kb.id) AS chunks
FROM knowledge_base AS kb
WHERE kb.id IN (SELECT value FROM json_each(:readable_kb_ids))
ORDER BY kb.name, kb.public_id
"""

# The documents come from the search engine's scope SQL (kbmcp/store/sqlite/search/scope.py),
# so listing, search and scan validate and apply knowledge bases, path prefixes and tags the
# same way.
# Keyset pagination on (updated_at DESC, public_id): stable while documents are added.
SELECT_DOCUMENTS = """
WITH scope_document AS MATERIALIZED ({documents})
SELECT d.public_id, kb.public_id, d.path, d.title, d.status, r.public_id, r.number,
       r.char_count, d.updated_at, d.metadata,
       (SELECT json_group_array(json_array(t.key, t.value))
        FROM (SELECT key, value FROM document_tag
              WHERE document_id = d.id ORDER BY key, value) AS t)
FROM scope_document AS s
JOIN document AS d ON d.id = s.id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
LEFT JOIN revision AS r ON r.id = d.current_revision_id
WHERE :cursor_updated IS NULL
   OR d.updated_at < :cursor_updated
   OR (d.updated_at = :cursor_updated AND d.public_id > :cursor_id)
ORDER BY d.updated_at DESC, d.public_id
LIMIT :limit
"""


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
    tags: Annotated[list[tuple[str, str]], Described("[key, value] pairs.")]
    metadata: dict[str, object]


@dataclass(frozen=True)
class DocumentPage:
    documents: Annotated[list[DocumentInfo], Described("Most recently updated first.")]
    next_cursor: Annotated[
        str | None, Described("Pass as cursor for the next page; null at the end.")
    ]


def list_knowledge_bases(workspace: Workspace, principal: Principal) -> list[KnowledgeBaseInfo]:
    principal.require(READ)
    rows = workspace.conn.execute(
        SELECT_KNOWLEDGE_BASES,
        {
            "readable_kb_ids": json.dumps(
                readable_kb_ids(workspace.store, workspace.conn, principal)
            )
        },
    )
    return [
        KnowledgeBaseInfo(
            kb_id, name, description, json.loads(tags), docs, chunks, created, updated
        )
        for kb_id, name, description, tags, created, updated, docs, chunks in rows
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
    if path_prefix is not None and (not isinstance(path_prefix, str) or not path_prefix.strip()):
        raise InvalidRequest(
            f"path_prefix must be a non-empty string (got {shown(path_prefix)})",
            details={"argument": "path_prefix"},
        )
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidRequest(
            "cursor is not a cursor returned by list_documents", details={"argument": "cursor"}
        )
    cursor_updated, cursor_id = _decode_cursor(cursor) if cursor else (None, None)
    conn = workspace.conn
    # An empty knowledge_base_ids list is an error there, never "every knowledge base".
    filters = SearchFilters(
        knowledge_base_ids=None if knowledge_base_ids is None else list(knowledge_base_ids),
        document_paths=[path_prefix] if path_prefix else None,
        tags=tags if tags else None,  # validated with the scope (a Mapping, or invalid_request)
    )
    # Documents only: memories are listed by kbmcp.service.memories.
    can_read = Readable(readable_kb_ids(workspace.store, conn, principal), None)
    scope = resolve_scope(workspace.store, conn, can_read, filters)
    rows = conn.execute(
        SELECT_DOCUMENTS.format(documents=documents_sql(scope, include_archived=include_archived)),
        {
            **scope_params(scope),
            "cursor_updated": cursor_updated,
            "cursor_id": cursor_id,
            "limit": limit + 1,
        },
    ).fetchall()
    documents = [
        DocumentInfo(
            document_id=doc_id,
            knowledge_base_id=kb_id,
            path=path,
            title=title,
            status=status,
            current_revision_id=rev_id,
            revision_number=number,
            size_chars=size or 0,
            updated_at=updated,
            tags=[tuple(pair) for pair in json.loads(tag_json or "[]")],
            metadata=json.loads(metadata),
        )
        for doc_id, kb_id, path, title, status, rev_id, number, size, updated, metadata, tag_json
        in rows[:limit]
    ]  # fmt: skip
    next_cursor = None
    if len(rows) > limit:
        last = documents[-1]
        next_cursor = _encode_cursor(last.updated_at, last.document_id)
    return DocumentPage(documents, next_cursor)


def _encode_cursor(updated_at: str, document_id: str) -> str:
    raw = json.dumps([updated_at, document_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        updated_at, document_id = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(updated_at, str) or not isinstance(document_id, str):
            raise ValueError
    except (ValueError, TypeError):
        raise InvalidRequest(
            "cursor is not a cursor returned by list_documents", details={"argument": "cursor"}
        ) from None
    return updated_at, document_id


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
