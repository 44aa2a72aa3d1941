"""Scan: the most recently updated documents and memories, newest first, without a query.

What an agent calls to see what changed ("what is new since Monday?") or to get its bearings in
an unfamiliar knowledge base. The same scope filters as search apply (knowledge bases, documents,
path prefixes, tags, metadata), plus a time window on the update time: `since` inclusive,
`until` exclusive. Memories are in the stream too (`kind` says which), under the same rules as
in search: include_documents / include_memories, memory_store_ids, tags over both kinds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Literal

from kbmcp.access import Principal, readable
from kbmcp.clock import format_timestamp, parse_timestamp
from kbmcp.described import Described
from kbmcp.errors import InvalidRequest
from kbmcp.neutralise import neutralise
from kbmcp.search.models import DEFAULT_LIMIT, MAX_LIMIT, SearchFilters
from kbmcp.search.scope import resolve_scope
from kbmcp.store.catalog import RESULT_KIND
from kbmcp.store.sqlite.search.scope import documents_sql, scope_params
from kbmcp.validate import integer, shown
from kbmcp.workspace import Workspace

EXCERPT_CHARS = 240

# The scope's documents come from the search engine's scope SQL
# (kbmcp/store/sqlite/search/scope.py), so scan and search validate and apply every filter the
# same way. {time}: the timestamp the scan
# is ordered and windowed by (SORTS), a column name, never caller text.
SELECT_RECENT = """
WITH scope_document AS MATERIALIZED ({documents})
SELECT kb.kind, d.public_id, kb.public_id, r.public_id, r.number, d.path, d.title, d.updated_at,
       d.created_at, r.char_count,
       (SELECT json_group_array(json_array(t.key, t.value))
        FROM (SELECT key, value FROM document_tag
              WHERE document_id = d.id ORDER BY key, value) AS t),
       (SELECT substr(c.text, 1, :excerpt_chars + 1) FROM chunk AS c
        WHERE c.revision_id = d.current_revision_id ORDER BY c.ordinal LIMIT 1)
FROM scope_document AS s
JOIN document AS d ON d.id = s.id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
JOIN revision AS r ON r.id = d.current_revision_id
WHERE (:since IS NULL OR {time} >= :since)
  AND (:until IS NULL OR {time} < :until)
ORDER BY {time} DESC, d.public_id
LIMIT :limit
"""
# sort -> the timestamp it orders by, newest first; since/until window the same timestamp.
SORTS = {"updated_desc": "d.updated_at", "created_desc": "d.created_at"}
DEFAULT_SORT = "updated_desc"


@dataclass(frozen=True)
class ScanItem:
    kind: Literal["document", "memory"]
    knowledge_base_id: str
    document_id: str
    revision_id: str
    revision_number: int
    path: str
    title: str
    updated_at: str
    created_at: Annotated[str, Described("When the document (or memory) was first added.")]
    size_chars: int
    tags: Annotated[list[tuple[str, str]], Described("[key, value] pairs.")]
    # the start of the first chunk, at most EXCERPT_CHARS characters
    excerpt: Annotated[str, Described("The start of the document.")]


@dataclass(frozen=True)
class ScanResponse:
    results: Annotated[
        list[ScanItem], Described("Newest first: most recently updated, or created (sort).")
    ]
    sort: Annotated[
        Literal["updated_desc", "created_desc"],
        Described("The order: updated_desc (default) or created_desc; since/until apply to it."),
    ]
    since: str | None  # normalised to UTC
    until: str | None
    limit: int
    limit_clamped: bool
    has_more: bool


def scan_recent(
    workspace: Workspace,
    principal: Principal,
    *,
    since: str | None = None,
    until: str | None = None,
    limit: int = DEFAULT_LIMIT,
    filters: SearchFilters | None = None,
    sort: str | None = None,
) -> ScanResponse:
    """The `limit` most recently updated (or, sort="created_desc", created) published documents
    and memories in scope, newest first; `since`/`until` window the same timestamp."""
    can_read = readable(workspace.store, workspace.conn, principal)
    filters = filters or SearchFilters()
    since_ts = _timestamp(since, "since")
    until_ts = _timestamp(until, "until")
    if since_ts and until_ts and since_ts >= until_ts:
        raise InvalidRequest(
            "since must be earlier than until", details={"argument": "since", "until": until_ts}
        )
    sort = _sort(sort)
    limit = integer(limit, "limit", 1)
    effective_limit = min(limit, MAX_LIMIT)
    scope = resolve_scope(workspace.store, workspace.conn, can_read, filters)
    rows = workspace.conn.execute(
        SELECT_RECENT.format(documents=documents_sql(scope), time=SORTS[sort]),
        {
            **scope_params(scope),
            "excerpt_chars": EXCERPT_CHARS,
            "since": since_ts,
            "until": until_ts,
            "limit": effective_limit + 1,
        },
    ).fetchall()
    return ScanResponse(
        results=[_item(row) for row in rows[:effective_limit]],
        sort=sort,  # type: ignore[arg-type]
        since=since_ts,
        until=until_ts,
        limit=effective_limit,
        limit_clamped=limit > MAX_LIMIT,
        has_more=len(rows) > effective_limit,
    )


def _sort(value: str | None) -> str:
    if value is None:
        return DEFAULT_SORT
    if not isinstance(value, str) or value not in SORTS:
        raise InvalidRequest(
            f"sort must be one of: {', '.join(SORTS)} (got {shown(value)})",
            details={"argument": "sort", "valid": list(SORTS)},
        )
    return value


def _timestamp(value: str | None, argument: str) -> str | None:
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise TypeError
        return format_timestamp(parse_timestamp(value))
    except (TypeError, ValueError):
        raise InvalidRequest(
            f"{argument}: {value!r} is not an ISO 8601 date or date-time "
            "(e.g. 2026-01-31 or 2026-01-31T09:00:00Z)",
            details={"argument": argument, "value": value},
        ) from None


def _item(row: tuple) -> ScanItem:
    (store_kind, doc_id, kb_id, rev_id, number, path, title, updated, created, size, tag_json,
     first_text) = row  # fmt: skip
    text = (first_text or "").strip()
    excerpt = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…"
    excerpt = neutralise(excerpt)
    return ScanItem(
        kind=RESULT_KIND[store_kind],
        knowledge_base_id=kb_id,
        document_id=doc_id,
        revision_id=rev_id,
        revision_number=number,
        path=path,
        title=title,
        updated_at=updated,
        created_at=created,
        size_chars=size,
        tags=[(key, value) for key, value in json.loads(tag_json or "[]")],
        excerpt=excerpt,
    )
