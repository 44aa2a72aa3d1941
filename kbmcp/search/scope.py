"""The scope of a search: which indexed chunks a request may see, decided before any ranking.

A scope is the principal's readable knowledge bases and memory stores narrowed by the request's
filters. Each backend expresses it as SQL over `document` (published only) joined to the chunks
of each document's current revision: exactly the rows its keyword and vector indexes hold
(kbmcp/store/sqlite/search/scope.py, kbmcp/store/postgres/scope.py). The channels take their
candidates from this allowed set only, so a filter can never be starved by better-scoring
passages elsewhere (the failure mode of "retrieve top-k, then filter").

Here: the filters' validation, which kinds (documents, memories) a request searches, and the
resolution of public ids to row ids (one batched query per kind of id through the store), with
the errors a caller sees. The same rules apply on both backends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Readable
from kbmcp.errors import Forbidden, InvalidRequest, ResourceUnavailable
from kbmcp.ids import check_id_list, check_list
from kbmcp.search.models import (
    MAX_DOCUMENT_IDS,
    MAX_FILTER_PAIRS,
    MAX_KNOWLEDGE_BASE_IDS,
    MAX_MEMORY_STORE_IDS,
    MAX_PATH_PREFIXES,
    SearchFilters,
)
from kbmcp.search.resolved import Scope
from kbmcp.validate import shown, storable

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection, Store


def resolve_scope(
    store: Store, conn: Connection, readable: Readable, filters: SearchFilters
) -> Scope:
    """Validate the filters and resolve ids; raises InvalidRequest / ResourceUnavailable /
    Forbidden (a kind asked for by include_* or by its filters without its read scope). Call
    inside the request's read snapshot when the scope is used for reading."""
    if not isinstance(filters, SearchFilters):
        raise InvalidRequest("filters must be a SearchFilters", details={"argument": "filters"})
    doc_argument, doc_values = _document_ids(filters)
    documents_on, memories_on = _kinds(readable, filters)
    kb_ids = readable.knowledge_base_ids if documents_on else None
    store_ids = readable.memory_store_ids if memories_on else None
    active: dict[str, Any] = {}
    kb_public = _ids(filters.knowledge_base_ids, "knowledge_base", "knowledge_base_ids",
                     MAX_KNOWLEDGE_BASE_IDS)  # fmt: skip
    doc_public = _ids(doc_values, "document", doc_argument, MAX_DOCUMENT_IDS)
    store_public = _ids(filters.memory_store_ids, "memory_store", "memory_store_ids",
                        MAX_MEMORY_STORE_IDS)  # fmt: skip
    if kb_public or doc_public:
        kbs, docs = _resolve_ids(store, conn, kb_ids or [], kb_public, doc_public, doc_argument)
        if kbs is not None:
            active["knowledge_base_ids"] = kbs
        if docs is not None:
            active["document_ids"] = docs
    if store_public:
        active["memory_store_ids"] = _resolve_store_ids(store, conn, store_ids or [], store_public)
    if filters.document_paths is not None:
        active["document_paths"] = _paths(filters.document_paths)
    if filters.tags is not None:
        active["tags"] = _tags(filters.tags)
    if filters.metadata is not None:
        active["metadata"] = _metadata(filters.metadata)
    # Every store of the file is searched (a kind left out is fine when it has no stores).
    searched = len(kb_ids or ()) + len(store_ids or ())
    everything = not active and store.search.count_stores(conn) == searched
    sent_as = {"document_ids": doc_argument} if doc_argument != "document_ids" else {}
    return Scope(kb_ids, store_ids, active, everything, sent_as)


def _document_ids(filters: SearchFilters) -> tuple[str, Any]:
    """The document ids and the name they came under: document_ids or its alias knowledge_ids."""
    if filters.knowledge_ids is None:
        return "document_ids", filters.document_ids
    if filters.document_ids is not None:
        raise InvalidRequest(
            "knowledge_ids: an alias of document_ids; pass only one of them",
            details={"argument": "knowledge_ids"},
        )
    return "knowledge_ids", filters.knowledge_ids


# The filters that select documents only, and memories only (a memory has no path, metadata or
# knowledge base; a document no memory store): given, they choose their kind.
DOCUMENT_ONLY = (
    "knowledge_base_ids",
    "document_ids",
    "knowledge_ids",
    "document_paths",
    "metadata",
)
MEMORY_ONLY = ("memory_store_ids",)


def _kinds(readable: Readable, filters: SearchFilters) -> tuple[bool, bool]:
    """Which kinds the search covers.

    A filter only one kind can satisfy chooses that kind: document filters alone search
    documents only, memory_store_ids alone memories only; with filters of both kinds each kind
    is searched, narrowed by its own; `tags` fits both and chooses nothing. include_documents /
    include_memories stay the switches: `true` searches that kind even beside the other kind's
    filters, `false` is never turned back on. A kind the principal cannot read is not searched.
    Asking for a kind the principal cannot read (include_* true, or a filter of that kind) is
    `Forbidden`; excluding both kinds, or filtering a kind the request excludes, is
    `InvalidRequest`."""
    include_documents = _flag(filters.include_documents, "include_documents")
    include_memories = _flag(filters.include_memories, "include_memories")
    if include_documents is False and include_memories is False:
        raise InvalidRequest(
            "include_documents and include_memories are both false: nothing would be searched",
            details={"argument": "include_documents"},
        )
    document_filters = [name for name in DOCUMENT_ONLY if getattr(filters, name) is not None]
    memory_filters = [name for name in MEMORY_ONLY if getattr(filters, name) is not None]
    kinds = []
    for include, stores, given, other_given, argument, scope in (
        (include_documents, readable.knowledge_base_ids, document_filters, memory_filters,
         "include_documents", KNOWLEDGE_READ),
        (include_memories, readable.memory_store_ids, memory_filters, document_filters,
         "include_memories", MEMORY_READ),
    ):  # fmt: skip
        if include is False and given:
            raise InvalidRequest(
                f"{given[0]} filters what {argument}=false excludes",
                details={"argument": given[0]},
            )
        if stores is None and (include is True or given):
            wanted = argument if include is True else given[0]
            raise Forbidden(
                f"{wanted} needs the '{scope}' scope, which this caller does not have",
                details={"argument": wanted, "required_scope": scope},
            )
        # Only the other kind's filters were given: they chose the other kind.
        chosen_away = include is None and other_given and not given
        kinds.append(include is not False and stores is not None and not chosen_away)
    return kinds[0], kinds[1]


def _flag(value: Any, argument: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise InvalidRequest(
        f"{argument} must be true or false (got {shown(value)})", details={"argument": argument}
    )


def unmatched_filters(store: Store, conn: Connection, scope: Scope) -> list[str]:
    """Names of the filters that alone select no indexed chunk, as the caller sent them. When
    every filter selects something on its own but together they select nothing, all of them are
    named: it is their combination that is empty. Only meaningful (and only called) for an
    empty scope."""
    if not scope.filters:
        return []
    empty = store.search.empty_filters(conn, scope)
    return [scope.sent_as.get(name, name) for name in empty or scope.filters]


def _resolve_store_ids(
    store: Store, conn: Connection, readable_store_ids: list[int], public_ids: list[str]
) -> list[int]:
    rows = store.search.resolve_memory_store_ids(conn, public_ids, readable_store_ids)
    unknown = [row.public_id for row in rows if row.row_id is None]
    if unknown:
        raise ResourceUnavailable(
            f"not found or not readable: memory_store_ids: {', '.join(unknown)}",
            details={"argument": "memory_store_ids", "memory_store_ids": unknown},
        )
    return [row.row_id for row in rows if row.row_id is not None]


def _ids(values: Sequence[str] | None, kind: str, argument: str, limit: int) -> list[str]:
    if values is None:
        return []
    return check_id_list(kind, values, argument=argument, limit=limit)


def _resolve_ids(
    store: Store,
    conn: Connection,
    readable_kb_ids: list[int],
    kb_public: list[str],
    doc_public: list[str],
    doc_argument: str = "document_ids",
) -> tuple[list[int] | None, list[int] | None]:
    """Internal row ids of the requested knowledge bases and documents; errors name the
    document ids as `doc_argument` (the name the caller used)."""
    rows = store.search.resolve_ids(conn, kb_public, doc_public, readable_kb_ids)
    unavailable: dict[str, list[str]] = {}
    kb_ids: list[int] = []
    documents: list[tuple[str, int, int]] = []
    for row in rows:
        if row.row_id is None or row.knowledge_base_id is None or not row.usable:
            named_as = doc_argument if row.argument == "document_ids" else row.argument
            unavailable.setdefault(named_as, []).append(row.public_id)
        elif row.argument == "knowledge_base_ids":
            kb_ids.append(row.row_id)
        else:
            documents.append((row.public_id, row.row_id, row.knowledge_base_id))
    if unavailable:
        named = "; ".join(f"{arg}: {', '.join(ids)}" for arg, ids in unavailable.items())
        raise ResourceUnavailable(
            f"not found, not readable or not published: {named}",
            # `argument` names the first offending argument, as every error's details do.
            details={"argument": next(iter(unavailable)), **unavailable},
        )
    if kb_public and doc_public:
        outside = [public for public, _, kb_id in documents if kb_id not in kb_ids]
        if outside:
            raise InvalidRequest(
                f"{doc_argument} outside the selected knowledge_base_ids: " + ", ".join(outside),
                details={"argument": doc_argument, doc_argument: outside},
            )
    return (kb_ids or None), ([row_id for _, row_id, _ in documents] or None)


def _paths(values: Any) -> list[str]:
    prefixes = []
    for value in check_list(values, argument="document_paths", limit=MAX_PATH_PREFIXES):
        if not isinstance(value, str) or not value.strip() or not storable(value):
            raise InvalidRequest(
                f"document_paths: {shown(value)} is not a non-empty path prefix",
                details={"argument": "document_paths", "value": value},
            )
        prefixes.append(value.strip())
    return list(dict.fromkeys(prefixes))


def _mapping(values: Any, argument: str) -> Mapping[str, Any]:
    if not isinstance(values, Mapping):
        raise InvalidRequest(
            f"{argument} must be an object of key/value pairs", details={"argument": argument}
        )
    if not values:
        raise InvalidRequest(f"{argument} must not be empty", details={"argument": argument})
    if len(values) > MAX_FILTER_PAIRS:
        raise InvalidRequest(
            f"{argument} accepts at most {MAX_FILTER_PAIRS} keys", details={"argument": argument}
        )
    return values


def _key(key: Any, argument: str) -> str:
    if not isinstance(key, str) or not key.strip() or not storable(key):
        raise InvalidRequest(
            f"{argument}: keys must be non-empty strings (got {shown(key)})",
            details={"argument": argument, "key": key},
        )
    return key.strip()


def _tags(values: Any) -> list[list[str]]:
    """The (key, value) pairs a tags filter asks for, sorted and unique: a key's value is a
    string, or a list of strings when it must carry several (the shape results show tags in,
    kbmcp/tags.py)."""
    pairs = set()
    for key, value in _mapping(values, "tags").items():
        wanted = value if isinstance(value, list) else [value]
        if (
            not wanted
            or len(wanted) > MAX_FILTER_PAIRS
            or not all(isinstance(one, str) and storable(one) for one in wanted)
        ):
            raise InvalidRequest(
                f"tags: the value of {shown(key)} must be a string or a list of 1-"
                f"{MAX_FILTER_PAIRS} strings (got {shown(value)})",
                details={"argument": "tags", "key": key},
            )
        clean_key = _key(key, "tags")
        pairs.update((clean_key, one.strip()) for one in wanted)
    return [list(pair) for pair in sorted(pairs)]


def _metadata(values: Any) -> dict[str, Any]:
    metadata = {}
    for key, value in _mapping(values, "metadata").items():
        scalar = value is None or isinstance(value, str | bool | int | float)
        if (
            not scalar
            or (isinstance(value, float) and not math.isfinite(value))
            or (isinstance(value, str) and not storable(value))
        ):
            raise InvalidRequest(
                f"metadata: the value of {shown(key)} must be a string, number, boolean or "
                f"null (got {shown(value)})",
                details={"argument": "metadata", "key": key},
            )
        metadata[_key(key, "metadata")] = value
    return metadata
