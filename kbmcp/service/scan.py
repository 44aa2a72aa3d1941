"""Scan: the most recently updated documents and memories, newest first, without a query.

What an agent calls to see what changed ("what is new since Monday?") or to get its bearings in
an unfamiliar knowledge base. The same scope filters as search apply (knowledge bases, documents,
path prefixes, tags, metadata), plus a time window on the update time: `since` inclusive,
`until` exclusive. Memories are in the stream too (`kind` says which), under the same rules as
in search: include_documents / include_memories, memory_store_ids, tags over both kinds.
"""

from __future__ import annotations

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
from kbmcp.store.scan import DEFAULT_SORT, SORTS, RecentRow
from kbmcp.tags import Tags, tag_object
from kbmcp.validate import integer, shown
from kbmcp.workspace import Workspace

EXCERPT_CHARS = 240


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
    created_at: Annotated[str, Described("First added.")]
    size_chars: int
    tags: Tags
    # the start of the first chunk, at most EXCERPT_CHARS characters
    excerpt: Annotated[str, Described("The start of the document.")]


@dataclass(frozen=True)
class ScanResponse:
    results: Annotated[list[ScanItem], Described("Newest first.")]
    sort: Annotated[
        Literal["updated_desc", "created_desc"],
        Described("since/until apply to its time."),
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
    store, conn = workspace.store, workspace.conn
    scope = resolve_scope(store, conn, can_read, filters)
    rows = store.scan.recent(
        conn,
        scope,
        sort=sort,
        since=since_ts,
        until=until_ts,
        limit=effective_limit + 1,
        excerpt_chars=EXCERPT_CHARS,
    )
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


def _item(row: RecentRow) -> ScanItem:
    text = (row.first_text or "").strip()
    excerpt = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…"
    excerpt = neutralise(excerpt)
    return ScanItem(
        kind=RESULT_KIND[row.store_kind],
        knowledge_base_id=row.knowledge_base_id,
        document_id=row.document_id,
        revision_id=row.revision_id,
        revision_number=row.revision_number,
        path=row.path,
        title=row.title,
        updated_at=row.updated_at,
        created_at=row.created_at,
        size_chars=row.char_count,
        tags=tag_object(row.tags),
        excerpt=excerpt,
    )
