"""The scope of a search: which indexed chunks a request may see, decided before any ranking.

A scope is the principal's readable knowledge bases narrowed by the request's filters. It is
expressed as SQL over `document` (published only) joined to the chunks of each document's current
revision: exactly the rows that are in chunk_fts and chunk_vec. The channels take their
candidates from this allowed set only, so a filter can never be starved by better-scoring
passages elsewhere (the failure mode of "retrieve top-k, then filter").

Validation is one batched query for all knowledge-base and document ids (json_each), not one per id.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import apsw

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
from kbmcp.validate import shown

if TYPE_CHECKING:  # imported where chunk ids become an array: `kbmcp ls` needs no numpy
    import numpy as np

# Every requested knowledge base and document id with what the principal may see of it, in one
# query. A row with a NULL id is unknown or not readable (the two are indistinguishable on purpose).
# A document must also be published. Its tenant is its knowledge base's owner by construction
# (migration 8), so a readable knowledge base is all a document needs.
RESOLVE_IDS = """
SELECT 'knowledge_base_ids', want.value, kb.id, kb.id, 1
FROM json_each(:knowledge_base_ids) AS want
LEFT JOIN knowledge_base AS kb
       ON kb.public_id = want.value
      AND kb.id IN (SELECT value FROM json_each(:readable_kb_ids))
UNION ALL
SELECT 'document_ids', want.value, d.id, d.knowledge_base_id, d.status = 'published'
FROM json_each(:document_ids) AS want
LEFT JOIN document AS d
       ON d.public_id = want.value
      AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids))
"""

# The documents every scope starts from: in a knowledge base the principal can read, and
# published ({published}; a listing may include archived documents).
BASE_DOCUMENTS = """
SELECT d.id, d.current_revision_id
FROM document AS d
WHERE d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids)){published}
"""
# The memories every scope starts from: in a memory store the principal can read (memories are
# documents of memory stores, migration 6); a forgotten memory is archived, so never searched.
BASE_MEMORIES = """
SELECT d.id, d.current_revision_id
FROM document AS d
WHERE d.knowledge_base_id IN (SELECT value FROM json_each(:readable_store_ids)){published}
"""
PUBLISHED = "\n  AND d.status = 'published'"
NOTHING = "SELECT NULL AS id, NULL AS current_revision_id WHERE 0"

# The documents each filter selects, as a subquery of document ids, whatever their store or
# status (the scope's base part narrows those). Index searches that read no document row, so an
# accelerator can intersect them and find their chunks in memory (`filter_documents`).
FILTER_DOCUMENTS = {
    "document_ids": "SELECT value FROM json_each(:document_ids)",
    # Each prefix is an index range on document(path) (migration 3): paths that start with it
    # sort from the prefix itself up to the prefix followed by U+10FFFF, the largest code point
    # (UTF-8 byte order is code point order). substr() confirms the prefix; it is not LIKE
    # because '%' and '_' in a path are literal characters. The one path the range leaves out is
    # one with the noncharacter U+10FFFF right after the prefix.
    "document_paths": """
        SELECT pd.id
        FROM json_each(:document_paths) AS p
        JOIN document AS pd
          ON pd.path >= p.value AND pd.path < p.value || char(1114111)
        WHERE substr(pd.path, 1, length(p.value)) = p.value""",
    # Every requested pair must be among the document's tags: one search of the index on
    # (key, value) per pair (migration 1), then the documents that matched all of them. Not a
    # NOT EXISTS per document, which tested every document (~100 ms at 100k chunks).
    "tags": """
        SELECT t.document_id
        FROM json_each(:tags) AS want
        JOIN document_tag AS t ON t.key = want.key AND t.value = want.value
        GROUP BY t.document_id
        HAVING count(*) = (SELECT count(*) FROM json_each(:tags))""",
    # Every requested key must be present with an equal value. Equality is typed (docs/search.md):
    # numbers compare numerically (1 = 1.0), true/false/null only match themselves, and a string
    # also matches a number or boolean written the same way ("2" matches 2, "true" matches true),
    # because command-line filters are always strings. Each probe [key, value, want_type,
    # want_value] (see `metadata_probes`) is one search of the index on document_metadata(key,
    # value) (migration 4); the CASE then applies the typed rule to the few rows found.
    "metadata": """
        SELECT m.document_id
        FROM json_each(:metadata) AS p
        JOIN document_metadata AS m ON m.key = p.value ->> 0 AND m.value IS p.value ->> 1
        WHERE CASE p.value ->> 2
              WHEN 'text' THEN
                   (m.type = 'text' AND m.value = p.value ->> 3)
                OR (m.type IN ('integer', 'real') AND CAST(m.value AS TEXT) = p.value ->> 3)
                OR (m.type IN ('true', 'false') AND m.type = p.value ->> 3)
              WHEN 'number' THEN m.type IN ('integer', 'real')
              ELSE m.type = p.value ->> 2
              END
        GROUP BY m.document_id
        HAVING count(DISTINCT m.key) = (SELECT count(DISTINCT value ->> 0)
                                        FROM json_each(:metadata))""",
}
# The memories each memory filter selects. A memory matches tags when every pair is among its
# own tags or its store's tags (a pair may come from either): (memory, key) hits from the tag
# index, UNION those from the tags of the readable memory stores, then memories that hit every
# key. CROSS JOIN fixes the order of the second part: stores first (few; one JSON object each),
# then their memories by the (knowledge_base_id, path) index. Left to itself the planner scanned
# every document and parsed its store's tags per row (5 ms for 10k memories; 0.3 ms this way).
MEMORY_FILTER_DOCUMENTS = {
    "tags": """
        SELECT hit.document_id
        FROM (SELECT t.document_id, t.key
              FROM json_each(:tags) AS want
              JOIN document_tag AS t ON t.key = want.key AND t.value = want.value
              UNION
              SELECT memory.id, want.key
              FROM json_each(:readable_store_ids) AS readable
              CROSS JOIN knowledge_base AS store
              CROSS JOIN json_each(store.tags) AS have
              CROSS JOIN json_each(:tags) AS want
              CROSS JOIN document AS memory
              WHERE store.id = readable.value
                AND have.key = want.key AND have.value = want.value
                AND memory.knowledge_base_id = store.id) AS hit
        GROUP BY hit.document_id
        HAVING count(*) = (SELECT count(*) FROM json_each(:tags))""",
}
# One clause per filter, ANDed onto BASE_DOCUMENTS. Each reads only its own parameter, so the same
# clause can be tested alone to say which filter selected nothing.
FILTER_CLAUSES = {
    "knowledge_base_ids": """
        d.knowledge_base_id IN (SELECT value FROM json_each(:knowledge_base_ids))""",
    **{name: f"d.id IN ({documents})" for name, documents in FILTER_DOCUMENTS.items()},
}
# The filters that narrow memories, ANDed onto BASE_MEMORIES. Document-only filters (knowledge
# bases, document ids, paths, metadata) never touch this part, and memory_store_ids never the
# documents part: when both kinds are searched (`_kinds` decides), each is narrowed by its own.
MEMORY_FILTER_CLAUSES = {
    "memory_store_ids": """
        d.knowledge_base_id IN (SELECT value FROM json_each(:memory_store_ids))""",
    **{name: f"d.id IN ({documents})" for name, documents in MEMORY_FILTER_DOCUMENTS.items()},
}

# A scope's chunks: its documents' current revisions' chunks (what `indexed_chunk` holds for a
# published document). MATERIALIZED: without it SQLite flattens the subquery and evaluates the
# filter clauses once per chunk after the join instead of once per document (48 ms -> 8 ms for a
# path prefix at 100k). The ids come back as one text, parsed by numpy (10k rows as tuples
# cost ~1 ms more), and are sorted there.
CHUNKS_OF_DOCUMENTS = """
WITH scope_document AS MATERIALIZED ({documents})
SELECT c.id
FROM scope_document AS s
JOIN chunk AS c ON c.revision_id = s.current_revision_id
"""
ID_LIST = "WITH listed(id) AS ({rows}) SELECT group_concat(id) FROM listed"
INTERSECT = "\nINTERSECT\n"

COUNT_KNOWLEDGE_BASES = "SELECT count(*) FROM knowledge_base"
RESOLVE_MEMORY_STORE_IDS = """
SELECT want.value, store.id
FROM json_each(:memory_store_ids) AS want
LEFT JOIN knowledge_base AS store
       ON store.public_id = want.value
      AND store.id IN (SELECT value FROM json_each(:readable_store_ids))
"""


@dataclass(frozen=True)
class Scope:
    """A resolved scope: which stores are searched, SQL clauses of the active filters and their
    parameters. `readable_kb_ids` / `memory_store_ids`: the knowledge bases / memory stores
    searched, None when that kind is not (excluded by the request or not readable)."""

    readable_kb_ids: list[int] | None
    memory_store_ids: list[int] | None = None
    filters: dict[str, Any] = field(default_factory=dict)  # active filter -> SQL parameter value
    # True when the scope is every indexed chunk (no filters, every knowledge base and memory
    # store readable and included): the channels then skip the allow-list entirely.
    everything: bool = False
    # A filter's name as the caller sent it, where it differs (knowledge_ids for document_ids).
    sent_as: dict[str, str] = field(default_factory=dict)

    @property
    def filtered(self) -> bool:
        return bool(self.filters)

    def documents_sql(self, only: str | None = None, *, include_archived: bool = False) -> str:
        """The scope's documents and memories (id, current_revision_id); `only`: with one filter
        alone, over the kinds it applies to."""
        names = [only] if only is not None else list(self.filters)
        published = "" if include_archived else PUBLISHED
        parts = []
        for base, stores, clauses in (
            (BASE_DOCUMENTS, self.readable_kb_ids, FILTER_CLAUSES),
            (BASE_MEMORIES, self.memory_store_ids, MEMORY_FILTER_CLAUSES),
        ):
            # A kind that is off, or has no readable store, adds nothing (and costs nothing).
            if not stores or (only is not None and only not in clauses):
                continue
            applied = "".join(f"  AND {clauses[n]}\n" for n in names if n in clauses)
            parts.append(base.format(published=published) + applied)
        return "UNION ALL".join(parts) or NOTHING

    def params(self) -> dict[str, Any]:
        values = {
            name: json.dumps(metadata_probes(value) if name == "metadata" else value)
            for name, value in self.filters.items()
        }
        return {
            "readable_kb_ids": json.dumps(self.readable_kb_ids or []),
            "readable_store_ids": json.dumps(self.memory_store_ids or []),
            **values,
        }


def resolve_scope(conn: apsw.Connection, readable: Readable, filters: SearchFilters) -> Scope:
    """Validate the filters and resolve ids; raises InvalidRequest / ResourceUnavailable /
    Forbidden (a kind asked for by include_* or by its filters without its read scope)."""
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
        kbs, docs = _resolve_ids(conn, kb_ids or [], kb_public, doc_public, doc_argument)
        if kbs is not None:
            active["knowledge_base_ids"] = kbs
        if docs is not None:
            active["document_ids"] = docs
    if store_public:
        active["memory_store_ids"] = _resolve_store_ids(conn, store_ids or [], store_public)
    if filters.document_paths is not None:
        active["document_paths"] = _paths(filters.document_paths)
    if filters.tags is not None:
        active["tags"] = _tags(filters.tags)
    if filters.metadata is not None:
        active["metadata"] = _metadata(filters.metadata)
    # Every store of the file is searched (a kind left out is fine when it has no stores).
    everything = not active and _reads_every_store(conn, len(kb_ids or ()) + len(store_ids or ()))
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


def scope_chunk_ids(conn: apsw.Connection, scope: Scope) -> np.ndarray | None:
    """The allowed chunk ids (sorted int64), or None when the scope is every indexed chunk."""
    if scope.everything:
        return None
    rows = CHUNKS_OF_DOCUMENTS.format(documents=scope.documents_sql())
    return _id_array(conn.execute(ID_LIST.format(rows=rows), scope.params()).fetchone()[0])


@dataclass(frozen=True)
class KindScope:
    """One kind's part of a scope as an accelerator maps it to chunks (vector/matrix.py): the
    stores searched, and the documents the filters select (None: every document of them)."""

    stores: list[int]
    documents: np.ndarray | None  # sorted ids


def filter_documents(conn: apsw.Connection, scope: Scope) -> list[KindScope]:
    """The scope per kind, with no document row read: the filters' index searches intersected
    (one statement per filtered kind), stores narrowed by the store filters. Its chunks are
    those of `scope_chunk_ids` (tests/test_search_one_shot.py)."""
    parts = []
    params = scope.params()
    for stores, store_filter, filter_documents_of in (
        (scope.readable_kb_ids, "knowledge_base_ids", FILTER_DOCUMENTS),
        (scope.memory_store_ids, "memory_store_ids", MEMORY_FILTER_DOCUMENTS),
    ):
        if not stores:
            continue
        chosen = set(scope.filters.get(store_filter, stores))
        selects = [sql for name, sql in filter_documents_of.items() if name in scope.filters]
        documents = None
        if selects:
            rows = INTERSECT.join(f"SELECT * FROM ({sql})" for sql in selects)
            text = conn.execute(ID_LIST.format(rows=rows), params).fetchone()[0]
            documents = _id_array(text)
        parts.append(KindScope([s for s in stores if s in chosen], documents))
    return parts


def _id_array(text: str | None) -> np.ndarray:
    """Sorted int64 ids from group_concat's comma-separated text (NULL: none)."""
    import numpy as np

    return np.sort(np.fromstring(text or "", dtype=np.int64, sep=","))


def unmatched_filters(conn: apsw.Connection, scope: Scope) -> list[str]:
    """Names of the filters that alone select no indexed chunk. When every filter selects
    something on its own but together they select nothing, all of them are named: it is their
    combination that is empty. Only meaningful (and only called) for an empty scope."""
    if not scope.filters:
        return []
    params = scope.params()
    empty = [
        name
        for name in scope.filters
        if conn.execute(
            "SELECT NOT EXISTS ("
            + CHUNKS_OF_DOCUMENTS.format(documents=scope.documents_sql(only=name))
            + ")",
            params,
        ).fetchone()[0]
    ]
    return [scope.sent_as.get(name, name) for name in empty or scope.filters]


def _reads_every_store(conn: apsw.Connection, readable_count: int) -> bool:
    return conn.execute(COUNT_KNOWLEDGE_BASES).fetchone()[0] == readable_count


def _resolve_store_ids(
    conn: apsw.Connection, readable_store_ids: list[int], public_ids: list[str]
) -> list[int]:
    rows = conn.execute(
        RESOLVE_MEMORY_STORE_IDS,
        {
            "memory_store_ids": json.dumps(public_ids),
            "readable_store_ids": json.dumps(readable_store_ids),
        },
    ).fetchall()
    unknown = [public_id for public_id, row_id in rows if row_id is None]
    if unknown:
        raise ResourceUnavailable(
            f"not found or not readable: memory_store_ids: {', '.join(unknown)}",
            details={"argument": "memory_store_ids", "memory_store_ids": unknown},
        )
    return [row_id for _, row_id in rows]


def _ids(values: Sequence[str] | None, kind: str, argument: str, limit: int) -> list[str]:
    if values is None:
        return []
    return check_id_list(kind, values, argument=argument, limit=limit)


def _resolve_ids(
    conn: apsw.Connection,
    readable_kb_ids: list[int],
    kb_public: list[str],
    doc_public: list[str],
    doc_argument: str = "document_ids",
) -> tuple[list[int] | None, list[int] | None]:
    """Internal row ids of the requested knowledge bases and documents; errors name the
    document ids as `doc_argument` (the name the caller used)."""
    rows = conn.execute(
        RESOLVE_IDS,
        {
            "knowledge_base_ids": json.dumps(kb_public),
            "document_ids": json.dumps(doc_public),
            "readable_kb_ids": json.dumps(readable_kb_ids),
        },
    ).fetchall()
    unavailable: dict[str, list[str]] = {}
    kb_ids: list[int] = []
    documents: list[tuple[str, int, int]] = []
    for argument, public_id, row_id, kb_id, usable in rows:
        if row_id is None or not usable:
            named_as = doc_argument if argument == "document_ids" else argument
            unavailable.setdefault(named_as, []).append(public_id)
        elif argument == "knowledge_base_ids":
            kb_ids.append(row_id)
        else:
            documents.append((public_id, row_id, kb_id))
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
        if not isinstance(value, str) or not value.strip():
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
    if not isinstance(key, str) or not key.strip():
        raise InvalidRequest(
            f"{argument}: keys must be non-empty strings (got {shown(key)})",
            details={"argument": argument, "key": key},
        )
    return key.strip()


def _tags(values: Any) -> dict[str, str]:
    tags = {}
    for key, value in _mapping(values, "tags").items():
        if not isinstance(value, str):
            raise InvalidRequest(
                f"tags: the value of {shown(key)} must be a string (got {shown(value)})",
                details={"argument": "tags", "key": key},
            )
        tags[_key(key, "tags")] = value.strip()
    return tags


def _metadata(values: Any) -> dict[str, Any]:
    metadata = {}
    for key, value in _mapping(values, "metadata").items():
        scalar = value is None or isinstance(value, str | bool | int | float)
        if not scalar or (isinstance(value, float) and not math.isfinite(value)):
            raise InvalidRequest(
                f"metadata: the value of {shown(key)} must be a string, number, boolean or "
                f"null (got {shown(value)})",
                details={"argument": "metadata", "key": key},
            )
        metadata[_key(key, "metadata")] = value
    return metadata


def metadata_probes(metadata: Mapping[str, Any]) -> list[list[Any]]:
    """[key, indexed value to look up, want_type, want_value] rows for the metadata clause.

    A string may equal a text value, or a number or boolean written the same way, so it is looked
    up as text, as a number when it reads as one, and as 1/0 when it is "true"/"false"; the typed
    rule in the SQL then keeps only real matches (e.g. "2.0" finds 2 by number, and the rule
    rejects it because 2 is written "2")."""
    probes: list[list[Any]] = []
    for key, want in metadata.items():
        if want is None:
            probes.append([key, None, "null", None])
        elif isinstance(want, bool):
            probes.append([key, int(want), "true" if want else "false", None])
        elif isinstance(want, int | float):
            probes.append([key, want, "number", None])
        else:
            probes.append([key, want, "text", want])
            number = _as_number(want)
            if number is not None:
                probes.append([key, number, "text", want])
            if want in ("true", "false"):
                probes.append([key, int(want == "true"), "text", want])
    return probes


def _as_number(text: str) -> int | float | None:
    for parse in (int, float):
        try:
            value = parse(text)
        except ValueError:
            continue
        return value if math.isfinite(value) else None
    return None
