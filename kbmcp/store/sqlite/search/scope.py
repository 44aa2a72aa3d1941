"""The scope of a search in SQLite SQL: the documents and chunks a resolved scope selects.

The rules (which filters, which kinds, the errors) are kbmcp/search/scope.py's; here they become
SQL over `document` (published only) joined to the chunks of each document's current revision:
exactly the rows that are in chunk_fts and chunk_vec. Listing and scan
(kbmcp/store/sqlite/listing.py, scan.py) select their documents with `documents_sql` too, so
every tool scopes alike.

Id resolution is one batched query for all knowledge-base and document ids (json_each), not one
per id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apsw

from kbmcp.search.resolved import Scope, metadata_probes
from kbmcp.store.search import ResolvedId, ScopeStatements

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

# The documents each filter selects among those of the readable stores, as a subquery of
# document ids, whatever their status (the scope's base part narrows that). Index searches that
# read no document row, so an accelerator can intersect them and find their chunks in memory
# (`filter_documents`).
#
# Every search is one range per readable store of an index that leads with the store (migration
# 11), fixed first by CROSS JOIN: the work follows the caller's own data. An index on (key,
# value) or (path) alone would also read the matching rows of every other tenant, and the time
# that takes would tell the caller how many there are (tests/test_scope_cost_isolation.py).
FILTER_DOCUMENTS = {
    "document_ids": "SELECT value FROM json_each(:document_ids)",
    # Each prefix is a range of UNIQUE (knowledge_base_id, path) per store: paths that start
    # with it sort from the prefix itself up to the prefix followed by U+10FFFF, the largest code
    # point (UTF-8 byte order is code point order). substr() confirms the prefix; it is not LIKE
    # because '%' and '_' in a path are literal characters. The one path the range leaves out is
    # one with the noncharacter U+10FFFF right after the prefix.
    "document_paths": """
        SELECT pd.id
        FROM json_each(:readable_kb_ids) AS store
        CROSS JOIN json_each(:document_paths) AS p
        CROSS JOIN document AS pd
        WHERE pd.knowledge_base_id = store.value
          AND pd.path >= p.value AND pd.path < p.value || char(1114111)
          AND substr(pd.path, 1, length(p.value)) = p.value""",
    # Every requested pair must be among the document's tags: one search of the index on
    # (store, key, value) per store and pair, then the documents that matched all of them. Not
    # a NOT EXISTS per document, which tested every document (~100 ms at 100k chunks).
    # :tags is a JSON array of distinct [key, value] pairs (a key may come with several values).
    "tags": """
        SELECT t.document_id
        FROM json_each(:readable_kb_ids) AS store
        CROSS JOIN json_each(:tags) AS want
        CROSS JOIN document_tag AS t
        WHERE t.knowledge_base_id = store.value
          AND t.key = want.value ->> 0 AND t.value = want.value ->> 1
        GROUP BY t.document_id
        HAVING count(*) = (SELECT count(*) FROM json_each(:tags))""",
    # Every requested key must be present with an equal value. Equality is typed (docs/search.md):
    # numbers compare numerically (1 = 1.0), true/false/null only match themselves, and a string
    # also matches a number or boolean written the same way ("2" matches 2, "true" matches true),
    # because command-line filters are always strings. Each probe [key, value, want_type,
    # want_value] (see `metadata_probes`) is one search of the index on document_metadata(store,
    # key, value) per store; the CASE then applies the typed rule to the few rows found.
    "metadata": """
        SELECT m.document_id
        FROM json_each(:readable_kb_ids) AS store
        CROSS JOIN json_each(:metadata) AS p
        CROSS JOIN document_metadata AS m
        WHERE m.knowledge_base_id = store.value
          AND m.key = p.value ->> 0 AND m.value IS p.value ->> 1
          AND CASE p.value ->> 2
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
# The memories each memory filter selects, among those of the readable memory stores. A memory
# matches tags when every pair is among its own tags or its store's tags (a pair may come from
# either): (memory, key, value) hits from the tag index (per store, as FILTER_DOCUMENTS' "tags"),
# UNION those from the tags of the readable memory stores, then memories that hit every pair. CROSS
# JOIN fixes the order of the second part: stores first (few; one JSON object each), then their
# memories by the (knowledge_base_id, path) index. Left to itself the planner scanned every
# document and parsed its store's tags per row (5 ms for 10k memories; 0.3 ms this way).
MEMORY_FILTER_DOCUMENTS = {
    "tags": """
        SELECT hit.document_id
        FROM (SELECT t.document_id, t.key, t.value
              FROM json_each(:readable_store_ids) AS store
              CROSS JOIN json_each(:tags) AS want
              CROSS JOIN document_tag AS t
              WHERE t.knowledge_base_id = store.value
                AND t.key = want.value ->> 0 AND t.value = want.value ->> 1
              UNION
              SELECT memory.id, have.key, have.value
              FROM json_each(:readable_store_ids) AS readable
              CROSS JOIN knowledge_base AS store
              CROSS JOIN json_each(store.tags) AS have
              CROSS JOIN json_each(:tags) AS want
              CROSS JOIN document AS memory
              WHERE store.id = readable.value
                AND have.key = want.value ->> 0 AND have.value = want.value ->> 1
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


STATEMENTS = ScopeStatements(
    BASE_DOCUMENTS, BASE_MEMORIES, FILTER_CLAUSES, MEMORY_FILTER_CLAUSES, PUBLISHED, NOTHING,
    CHUNKS_OF_DOCUMENTS,
)  # fmt: skip
documents_sql = STATEMENTS.documents_sql


def scope_params(scope: Scope) -> dict[str, Any]:
    """The parameters of `documents_sql`: id lists and filter values as JSON."""
    values = {
        name: json.dumps(metadata_probes(value) if name == "metadata" else value)
        for name, value in scope.filters.items()
    }
    return {
        "readable_kb_ids": json.dumps(scope.readable_kb_ids or []),
        "readable_store_ids": json.dumps(scope.memory_store_ids or []),
        **values,
    }


def scope_chunk_ids(conn: apsw.Connection, scope: Scope) -> np.ndarray | None:
    """The allowed chunk ids (sorted int64), or None when the scope is every indexed chunk."""
    if scope.everything:
        return None
    rows = CHUNKS_OF_DOCUMENTS.format(documents=documents_sql(scope))
    return _id_array(conn.execute(ID_LIST.format(rows=rows), scope_params(scope)).fetchone()[0])


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
    params = scope_params(scope)
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


def empty_filters(conn: apsw.Connection, scope: Scope) -> list[str]:
    """The filters (by name) that alone select no indexed chunk."""
    return STATEMENTS.empty_filters(conn, scope, scope_params(scope))


def count_stores(conn: apsw.Connection) -> int:
    """Knowledge bases and memory stores in the file."""
    return int(conn.execute(COUNT_KNOWLEDGE_BASES).fetchone()[0])


def resolve_ids(
    conn: apsw.Connection,
    knowledge_base_ids: list[str],
    document_ids: list[str],
    readable_kb_ids: list[int],
) -> list[ResolvedId]:
    rows = conn.execute(
        RESOLVE_IDS,
        {
            "knowledge_base_ids": json.dumps(knowledge_base_ids),
            "document_ids": json.dumps(document_ids),
            "readable_kb_ids": json.dumps(readable_kb_ids),
        },
    ).fetchall()
    return [ResolvedId(argument, public_id, row_id, kb_id, bool(usable))
            for argument, public_id, row_id, kb_id, usable in rows]  # fmt: skip


def resolve_memory_store_ids(
    conn: apsw.Connection, memory_store_ids: list[str], readable_store_ids: list[int]
) -> list[ResolvedId]:
    rows = conn.execute(
        RESOLVE_MEMORY_STORE_IDS,
        {
            "memory_store_ids": json.dumps(memory_store_ids),
            "readable_store_ids": json.dumps(readable_store_ids),
        },
    ).fetchall()
    return [ResolvedId("memory_store_ids", public_id, row_id, row_id, row_id is not None)
            for public_id, row_id in rows]  # fmt: skip
