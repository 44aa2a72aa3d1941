"""The scope of a search in PostgreSQL SQL: SQLite's scope statements
(kbmcp/store/sqlite/search/scope.py), clause for clause, with PostgreSQL's spellings.

The rules (which filters, which kinds, the errors) are kbmcp/search/scope.py's. What differs:
- id lists are arrays (`= ANY(%(ids)s::bigint[])`, `unnest(...) WITH ORDINALITY` where the
  request's order matters), not JSON texts;
- a path prefix is a range of `document_by_store_path` per readable store, an index `COLLATE
  "C"` (byte order, as SQLite's BINARY, whatever the database's locale), so the range is
  SQLite's;
- `document_metadata.value` is a jsonb atom (jsonb compares numbers numerically, 1 = 1.0, as
  SQLite compares its numbers) and booleans are JSON booleans, not SQLite's 1/0: the probes
  (`metadata_probes`) are written as jsonb, and the typed rule's text form of a number is
  computed as SQLite's `CAST(x AS TEXT)` gives it, not taken from jsonb (which keeps "1.50"
  and writes 1e20 out in full where SQLite writes "1.5" and "1.0e+20").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw
import numpy as np
import psycopg

from kbmcp.search.resolved import Scope, metadata_probes
from kbmcp.store.search import ResolvedId, ScopeStatements

PgConnection = psycopg.Connection[Any]

# The requested knowledge bases and documents the principal may see (SQLite's RESOLVE_IDS
# gives each requested id with what the principal may see of it; here the rows found are
# matched to the request's ids, in its order, in Python: `resolve_ids`). Not a LEFT JOIN from
# the requested list: on Citus a join of a function scan to a distributed table is planned by
# pulling the table's rows of every readable store to the coordinator (a knowledge base id took
# 218 ms at 1M chunks); filtered by `= ANY`, each shard answers from its public-id index. Each
# kind is asked only when the request names some.
RESOLVE_KNOWLEDGE_BASES = """
SELECT kb.public_id, kb.id
FROM knowledge_base AS kb
WHERE kb.public_id = ANY(%(knowledge_base_ids)s::text[])
  AND kb.id = ANY(%(readable_kb_ids)s::bigint[])
"""
RESOLVE_DOCUMENTS = """
SELECT d.public_id, d.id, d.knowledge_base_id, d.status = 'published'
FROM document AS d
WHERE d.public_id = ANY(%(document_ids)s::text[])
  AND d.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
"""
RESOLVE_MEMORY_STORE_IDS = """
SELECT want.value, store.id
FROM unnest(%(memory_store_ids)s::text[]) WITH ORDINALITY AS want(value, n)
LEFT JOIN knowledge_base AS store
       ON store.public_id = want.value
      AND store.id = ANY(%(readable_store_ids)s::bigint[])
ORDER BY want.n
"""
COUNT_KNOWLEDGE_BASES = "SELECT count(*) FROM knowledge_base"

# A scope's documents: (id, current_revision_id, knowledge_base_id); the statements that read
# them join their rows by the store too (migration 9).
# With each document's current revision's chunk range (migration 10: what the runs are read
# from).
BASE_DOCUMENTS = """
SELECT d.id, d.current_revision_id, d.knowledge_base_id, d.current_first_chunk_id,
       d.current_last_chunk_id, d.current_chunk_count
FROM document AS d
WHERE d.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[]){published}
"""
BASE_MEMORIES = """
SELECT d.id, d.current_revision_id, d.knowledge_base_id, d.current_first_chunk_id,
       d.current_last_chunk_id, d.current_chunk_count
FROM document AS d
WHERE d.knowledge_base_id = ANY(%(readable_store_ids)s::bigint[]){published}
"""
PUBLISHED = "\n  AND d.status = 'published'"
NOTHING = """SELECT NULL::bigint AS id, NULL::bigint AS current_revision_id,
       NULL::bigint AS knowledge_base_id, NULL::bigint AS current_first_chunk_id,
       NULL::bigint AS current_last_chunk_id, 0::integer AS current_chunk_count WHERE false"""

# As SQLite's, every filter searches an index that leads with the store, within the readable
# stores only (migration 5): its work follows the caller's own data, not other tenants'. Each
# selects (document id, store): a document is matched by both (migration 9).
FILTER_DOCUMENTS = {
    # A range of document_by_store_path (COLLATE "C") per store: from the prefix up to the
    # prefix followed by U+10FFFF, the largest code point (UTF-8 byte order is code point
    # order); left() confirms the prefix (not LIKE: '%' and '_' in a path are literal characters).
    "document_paths": """
        SELECT pd.id, pd.knowledge_base_id
        FROM unnest(%(document_paths)s::text[]) AS p(value)
        JOIN document AS pd
          ON pd.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
         AND pd.path COLLATE "C" >= p.value
         AND pd.path COLLATE "C" < p.value || chr(1114111)
        WHERE left(pd.path, length(p.value)) = p.value""",
    "tags": """
        SELECT t.document_id, t.knowledge_base_id
        FROM unnest(%(tag_keys)s::text[], %(tag_values)s::text[]) AS want(key, value)
        JOIN document_tag AS t
          ON t.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
         AND t.key = want.key AND t.value = want.value
        GROUP BY t.document_id, t.knowledge_base_id
        HAVING count(*) = cardinality(%(tag_keys)s::text[])""",
    # Each probe (see `_metadata_params`) is one search of document_metadata(store, key, value)
    # per readable store; the CASE then applies SQLite's typed rule to the rows found. A
    # number's text form is the probe's, computed as SQLite's CAST gives it: the row equals the
    # probe's number, so its text is the probe number's written as an integer or as a real.
    "metadata": """
        SELECT m.document_id, m.knowledge_base_id
        FROM unnest(%(metadata_keys)s::text[], %(metadata_lookups)s::text[],
                    %(metadata_types)s::text[], %(metadata_wants)s::text[],
                    %(metadata_integer_texts)s::text[], %(metadata_real_texts)s::text[])
             AS p(key, lookup, want_type, want_value, integer_text, real_text)
        JOIN document_metadata AS m
          ON m.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
         AND m.key = p.key AND m.value = p.lookup::jsonb
        WHERE CASE p.want_type
              WHEN 'text' THEN
                   m.type = 'text'
                OR (m.type = 'integer' AND p.integer_text = p.want_value)
                OR (m.type = 'real' AND p.real_text = p.want_value)
                OR (m.type IN ('true', 'false') AND m.type = p.want_value)
              WHEN 'number' THEN m.type IN ('integer', 'real')
              ELSE m.type = p.want_type
              END
        GROUP BY m.document_id, m.knowledge_base_id
        HAVING count(DISTINCT m.key) = %(metadata_key_count)s""",
}
# A memory matches tags when every pair is among its own tags or its store's (see SQLite's).
MEMORY_FILTER_DOCUMENTS = {
    "tags": """
        SELECT hit.document_id, hit.knowledge_base_id
        FROM (SELECT t.document_id, t.knowledge_base_id, t.key, t.value
              FROM unnest(%(tag_keys)s::text[], %(tag_values)s::text[]) AS want(key, value)
              JOIN document_tag AS t
                ON t.knowledge_base_id = ANY(%(readable_store_ids)s::bigint[])
               AND t.key = want.key AND t.value = want.value
              UNION
              SELECT memory.id, memory.knowledge_base_id, want.key, want.value
              FROM knowledge_base AS store
              CROSS JOIN jsonb_each(store.tags::jsonb) AS have(key, value)
              JOIN unnest(%(tag_keys)s::text[], %(tag_values)s::text[]) AS want(key, value)
                ON have.key = want.key AND have.value = to_jsonb(want.value)
              JOIN document AS memory ON memory.knowledge_base_id = store.id
              WHERE store.id = ANY(%(readable_store_ids)s::bigint[])
                AND memory.knowledge_base_id = ANY(%(readable_store_ids)s::bigint[])) AS hit
        GROUP BY hit.document_id, hit.knowledge_base_id
        HAVING count(*) = cardinality(%(tag_keys)s::text[])""",
}
FILTER_CLAUSES = {
    "knowledge_base_ids": "d.knowledge_base_id = ANY(%(knowledge_base_ids)s::bigint[])",
    "document_ids": "d.id IN (SELECT unnest(%(document_ids)s::bigint[]))",
    **{name: f"(d.id, d.knowledge_base_id) IN ({documents})"
       for name, documents in FILTER_DOCUMENTS.items()},
}  # fmt: skip
MEMORY_FILTER_CLAUSES = {
    "memory_store_ids": "d.knowledge_base_id = ANY(%(memory_store_ids)s::bigint[])",
    **{name: f"(d.id, d.knowledge_base_id) IN ({documents})"
       for name, documents in MEMORY_FILTER_DOCUMENTS.items()},
}  # fmt: skip

# A scope's chunks: its documents' current revisions' chunks, as one sorted array.
CHUNKS_OF_DOCUMENTS = """
WITH scope_document AS MATERIALIZED ({documents})
SELECT c.id
FROM scope_document AS s
JOIN chunk AS c
  ON c.knowledge_base_id = s.knowledge_base_id AND c.revision_id = s.current_revision_id
 AND c.knowledge_base_id = ANY(%(scope_stores)s::bigint[])
"""
# A scope's chunks as runs of consecutive ids in one store (`ScopeRuns`): per document, its
# current revision's smallest and largest chunk id and how many chunks it has (kept on the
# document row by triggers: sql/010_document_chunk_range.sql; before, one read of the
# revision's range per document, and before that an aggregate over its chunks), and the ids of
# the revisions whose chunks are not consecutive (a revision's chunks are written together, so
# they nearly always are). A scope of 1,000 documents is then 1,000 pairs, merged into runs in
# Python, instead of 10,000 ids sorted, sent back and forth and estimated by the planner (the
# channels read the runs as index ranges of their store: keyword_channel.py,
# vector_channel.py).
SCOPE_RUN_CTES = """scope_document AS MATERIALIZED ({documents}),
revision_chunk AS MATERIALIZED (
    SELECT s.current_revision_id AS revision_id, s.knowledge_base_id AS store,
           s.current_first_chunk_id AS lo, s.current_last_chunk_id AS hi,
           s.current_chunk_count AS n
    FROM scope_document AS s
    WHERE s.current_chunk_count > 0 AND s.knowledge_base_id = ANY(%(scope_stores)s::bigint[])
)"""
# The runs' columns (`runs_of_rows`'s arguments): the revisions whose chunks are consecutive
# as three arrays, [first ids, last ids, stores], and the single ids of the others as two,
# [ids, stores]; scalar subqueries, also columns of the search's first statement (prelude.py).
# Flat arrays in no order: `runs_of` sorts and merges them, and an ARRAY[lo, hi, store] per
# revision in a sorted aggregate cost ~0.15 ms more for 1,000 revisions.
SCOPE_RUN_COLUMNS = """
       (SELECT ARRAY[coalesce(array_agg(lo), '{}'), coalesce(array_agg(hi), '{}'),
                     coalesce(array_agg(store), '{}')]
        FROM revision_chunk
        WHERE n = hi - lo + 1),
       (SELECT ARRAY[coalesce(array_agg(c.id), '{}'),
                     coalesce(array_agg(c.knowledge_base_id), '{}')]
        FROM revision_chunk AS r
        JOIN chunk AS c ON c.knowledge_base_id = r.store AND c.revision_id = r.revision_id
        WHERE r.n <> r.hi - r.lo + 1 AND c.knowledge_base_id = ANY(%(scope_stores)s::bigint[]))"""
SCOPE_RUNS = "WITH {ctes}\nSELECT {columns}"
SELECTED_DOCUMENT_CHUNKS = """
SELECT coalesce(array_agg(chunk_id ORDER BY chunk_id), '{}')
FROM indexed_chunk
WHERE document_id = ANY(%(document_ids)s::bigint[])
"""
# The indexed chunks of the documents at exactly these paths in these knowledge bases: a path
# in document_paths that names a document is as explicit as its id (kbmcp/search/floor.py).
# Equality needs no collation (deterministic collations compare equal bytes only).
CHUNKS_AT_PATHS = """
SELECT coalesce(array_agg(i.chunk_id ORDER BY i.chunk_id), '{}')
FROM indexed_chunk AS i
JOIN document AS d ON d.id = i.document_id
WHERE i.knowledge_base_id = ANY(%(knowledge_base_ids)s::bigint[])
  AND d.path = ANY(%(paths)s::text[])
"""


STATEMENTS = ScopeStatements(
    BASE_DOCUMENTS, BASE_MEMORIES, FILTER_CLAUSES, MEMORY_FILTER_CLAUSES, PUBLISHED, NOTHING,
    CHUNKS_OF_DOCUMENTS,
)  # fmt: skip
documents_sql = STATEMENTS.documents_sql


def scope_params(scope: Scope) -> dict[str, Any]:
    """The parameters of `documents_sql`."""
    params: dict[str, Any] = {
        "readable_kb_ids": list(scope.readable_kb_ids or []),
        "readable_store_ids": list(scope.memory_store_ids or []),
        # Every store the scope reads: each read of a chunk names them, which on Citus routes
        # a scope of one store's shard to that shard alone (the join to the document would
        # not: Citus prunes shards by the conditions on each table).
        "scope_stores": sorted({*(scope.readable_kb_ids or []), *(scope.memory_store_ids or [])}),
    }
    for name, value in scope.filters.items():
        if name == "tags":
            params["tag_keys"] = [key for key, _ in value]
            params["tag_values"] = [tag for _, tag in value]
        elif name == "metadata":
            params.update(_metadata_params(value))
        else:
            params[name] = list(value)
    return params


def _metadata_params(metadata: dict[str, Any]) -> dict[str, Any]:
    """The probes of kbmcp/search/scope.py `metadata_probes` as columns: the value to look up
    as JSON text (a boolean as a JSON boolean: SQLite's 1/0 stand for them there), and for a
    text probe of a number the number's text as SQLite writes an integer and a real."""
    columns: dict[str, list[Any]] = {
        "metadata_keys": [],
        "metadata_lookups": [],
        "metadata_types": [],
        "metadata_wants": [],
        "metadata_integer_texts": [],
        "metadata_real_texts": [],
    }
    for key, lookup, want_type, want_value in metadata_probes(metadata):
        boolean = want_type in ("true", "false") or (
            want_type == "text" and want_value in ("true", "false") and not isinstance(lookup, str)
        )
        if boolean:
            lookup = bool(lookup)
        number = isinstance(lookup, int | float) and not isinstance(lookup, bool)
        columns["metadata_keys"].append(key)
        columns["metadata_lookups"].append(json.dumps(lookup))
        columns["metadata_types"].append(want_type)
        columns["metadata_wants"].append(want_value)
        integral = number and float(lookup).is_integer()
        columns["metadata_integer_texts"].append(str(int(lookup)) if integral else None)
        columns["metadata_real_texts"].append(sqlite_real_text(float(lookup)) if number else None)
    return {**columns, "metadata_key_count": len(metadata)}


class _Sqlite(threading.local):
    def __init__(self) -> None:
        self.conn = apsw.Connection(":memory:")


_sqlite = _Sqlite()


def sqlite_real_text(value: float) -> str:
    """SQLite's CAST(value AS TEXT) of a real (e.g. 1.5 -> '1.5', 2.0 -> '2.0', 1e20 ->
    '1.0e+20'), asked of SQLite itself."""
    return str(_sqlite.conn.execute("SELECT CAST(? AS TEXT)", (value,)).fetchone()[0])


@dataclass(frozen=True)
class ScopeRuns:
    """A scope's chunk ids as runs: every id from lo[i] to hi[i] of store[i] (int64 arrays),
    sorted by store then id, disjoint, and never adjacent in one store (adjacent runs are one).
    A run is in one store: the statements read it as a range of that store's rows (on Citus,
    of its shard)."""

    lo: np.ndarray
    hi: np.ndarray
    store: np.ndarray

    @property
    def rows(self) -> int:
        return int(np.sum(self.hi - self.lo + 1))

    @property
    def runs(self) -> int:
        return len(self.lo)

    def ids(self) -> np.ndarray:
        """Every id, sorted."""
        if not len(self.lo):
            return np.zeros(0, dtype=np.int64)
        pairs = zip(self.lo.tolist(), self.hi.tolist(), strict=True)
        return np.sort(np.concatenate([np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in pairs]))

    def stores(self) -> list[int]:
        """The stores the runs are in, ascending."""
        return sorted(set(self.store.tolist()))

    def of_store(self, store: int) -> ScopeRuns:
        """The runs in one store."""
        keep = self.store == store
        return ScopeRuns(self.lo[keep], self.hi[keep], self.store[keep])


def runs_of(
    lo: Sequence[int],
    hi: Sequence[int],
    singles: Sequence[int] = (),
    stores: Sequence[int] | None = None,
    single_stores: Sequence[int] | None = None,
) -> ScopeRuns:
    """Runs from disjoint id ranges [lo, hi] of `stores` and single ids of `single_stores`, in
    any order: sorted and merged within each store (no store given: all in store 0)."""
    low = np.concatenate([np.asarray(lo, dtype=np.int64), np.asarray(singles, dtype=np.int64)])
    high = np.concatenate([np.asarray(hi, dtype=np.int64), np.asarray(singles, dtype=np.int64)])
    store = np.concatenate([_stores(stores, len(lo)), _stores(single_stores, len(singles))])
    order = np.lexsort((low, store))
    low, high, store = low[order], high[order], store[order]
    if not len(low):
        return ScopeRuns(low, high, store)
    # A run starts where the previous one is in another store or does not end just before it.
    starts = np.flatnonzero(
        np.concatenate(([True], (low[1:] != high[:-1] + 1) | (store[1:] != store[:-1])))
    )
    ends = np.concatenate((starts[1:] - 1, [len(low) - 1]))
    return ScopeRuns(low[starts], high[ends], store[starts])


def runs_of_rows(runs: Sequence[Sequence[int]] | None, singles: Sequence[Sequence[int]] | None
                 ) -> ScopeRuns:  # fmt: skip
    """Runs from SCOPE_RUN_COLUMNS' arrays: [first ids, last ids, stores] of the consecutive
    revisions, [ids, stores] of the single ids (empty arrays, or None: no rows)."""
    found = np.asarray(runs or [], dtype=np.int64).reshape(3, -1)
    alone = np.asarray(singles or [], dtype=np.int64).reshape(2, -1)
    return runs_of(found[0], found[1], alone[0], found[2], alone[1])


def _stores(stores: Sequence[int] | None, count: int) -> np.ndarray:
    if stores is None:
        return np.zeros(count, dtype=np.int64)
    return np.asarray(stores, dtype=np.int64)


@dataclass(frozen=True)
class ScopeQuery:
    """A filtered scope's runs as SQL: the CTEs (SCOPE_RUN_CTES) and columns (SCOPE_RUN_COLUMNS)
    of a statement, with their parameters."""

    ctes: str
    columns: str
    params: dict[str, Any]


def scope_query(scope: Scope) -> ScopeQuery | None:
    """The SQL of the scope's runs, None when the scope is every indexed chunk."""
    if scope.everything:
        return None
    ctes = SCOPE_RUN_CTES.format(documents=documents_sql(scope))
    return ScopeQuery(ctes, SCOPE_RUN_COLUMNS, scope_params(scope))


def scope_runs(conn: PgConnection, scope: Scope) -> ScopeRuns | None:
    """The allowed chunks as runs, or None when the scope is every indexed chunk."""
    query = scope_query(scope)
    if query is None:
        return None
    sql = SCOPE_RUNS.format(ctes=query.ctes, columns=query.columns)
    return runs_of_rows(*conn.execute(sql, query.params).fetchone())


def scope_chunk_ids(conn: PgConnection, scope: Scope) -> np.ndarray | None:
    """The allowed chunk ids (sorted int64), or None when the scope is every indexed chunk."""
    runs = scope_runs(conn, scope)
    return None if runs is None else runs.ids()


def empty_filters(conn: PgConnection, scope: Scope) -> list[str]:
    """The filters (by name) that alone select no indexed chunk."""
    return STATEMENTS.empty_filters(conn, scope, scope_params(scope))


def count_stores(conn: PgConnection) -> int:
    return int(conn.execute(COUNT_KNOWLEDGE_BASES).fetchone()[0])


def resolve_ids(
    conn: PgConnection,
    knowledge_base_ids: list[str],
    document_ids: list[str],
    readable_kb_ids: list[int],
) -> list[ResolvedId]:
    """Each requested id, knowledge bases first, each kind in the request's order, with what
    the principal may see of it (an unknown or unreadable id: no row id; a knowledge base is
    always usable, a document when it is published)."""
    resolved: list[ResolvedId] = []
    readable = list(readable_kb_ids)
    if knowledge_base_ids:
        params = {"knowledge_base_ids": list(knowledge_base_ids), "readable_kb_ids": readable}
        found: dict[str, list[tuple[Any, ...]]] = {}
        for public_id, kb_id in conn.execute(RESOLVE_KNOWLEDGE_BASES, params):
            found.setdefault(public_id, []).append((kb_id, kb_id, True))
        resolved += _in_request_order("knowledge_base_ids", knowledge_base_ids, found, True)
    if document_ids:
        params = {"document_ids": list(document_ids), "readable_kb_ids": readable}
        found = {}
        for public_id, row_id, kb_id, published in conn.execute(RESOLVE_DOCUMENTS, params):
            found.setdefault(public_id, []).append((row_id, kb_id, bool(published)))
        resolved += _in_request_order("document_ids", document_ids, found, False)
    return resolved


def _in_request_order(
    argument: str, wanted: list[str], found: dict[str, list[tuple[Any, ...]]], unknown_usable: bool
) -> list[ResolvedId]:
    """A ResolvedId per requested id (per row found for it), in the request's order; an id
    without a row gets none (`unknown_usable`: what it says of usability, as the SQL of the
    other backend does)."""
    out = []
    for public_id in wanted:
        for row_id, kb_id, usable in found.get(public_id, [(None, None, unknown_usable)]):
            out.append(ResolvedId(argument, public_id, row_id, kb_id, usable))
    return out


def resolve_memory_store_ids(
    conn: PgConnection, memory_store_ids: list[str], readable_store_ids: list[int]
) -> list[ResolvedId]:
    rows = conn.execute(
        RESOLVE_MEMORY_STORE_IDS,
        {
            "memory_store_ids": list(memory_store_ids),
            "readable_store_ids": list(readable_store_ids),
        },
    ).fetchall()
    return [ResolvedId("memory_store_ids", public_id, row_id, row_id, row_id is not None)
            for public_id, row_id in rows]  # fmt: skip


def selected_document_chunks(conn: PgConnection, document_ids: list[int]) -> np.ndarray:
    ids = conn.execute(SELECTED_DOCUMENT_CHUNKS, {"document_ids": list(document_ids)}).fetchone()
    return np.asarray(ids[0], dtype=np.int64)


def chunks_at_paths(
    conn: PgConnection, knowledge_base_ids: list[int], paths: list[str]
) -> np.ndarray:
    parameters = {"knowledge_base_ids": list(knowledge_base_ids), "paths": list(paths)}
    ids = conn.execute(CHUNKS_AT_PATHS, parameters).fetchone()
    return np.asarray(ids[0], dtype=np.int64)
