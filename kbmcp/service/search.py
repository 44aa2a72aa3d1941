"""Search: the one function behind `kbmcp search` and the MCP `search_knowledge` tool.

Order of work (DESIGN.md, "scope first, then rank, then limit"):
1. validate every argument and resolve the scope (ids, readability, conflicts) - no retrieval yet;
2. embed the query (only if a vector channel runs);
3. inside one read snapshot (`Store.read_snapshot`, on SQLite and PostgreSQL alike): the
   readable set and the scope resolved again, then the backend's ranking
   (kbmcp/search/engine.py, the `search` concern of kbmcp/store/search.py).

One snapshot decides what the caller may read and what is ranked. Step 1 only reports a bad
request before the model loads and the query is embedded; what it resolved is not used, because
another process may commit meanwhile (e.g. another tenant's first memory store: a scope decided
before it as "every store of the file" would search that store too).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from kbmcp.access import Principal, readable, require_a_read_scope
from kbmcp.errors import InvalidRequest
from kbmcp.search.engine import readable_stores, run_search
from kbmcp.search.models import SearchRequest, SearchResponse
from kbmcp.search.request import check_arguments
from kbmcp.search.scope import resolve_scope
from kbmcp.service.inline_content import with_content
from kbmcp.workspace import Workspace


def search(
    workspace: Workspace,
    principal: Principal,
    request: SearchRequest,
    *,
    query_vector: Sequence[float] | np.ndarray | None = None,
) -> SearchResponse:
    """Search with `request`. `query_vector`: use this embedding of the query instead of
    embedding it with the workspace's model (benchmarks, tools with their own embeddings); it
    must have the dimension of the file's model."""
    started = time.perf_counter()
    store, conn = workspace.store, workspace.conn
    settings = workspace.settings
    # A caller without any read scope is Forbidden before all else.
    require_a_read_scope(principal)
    args = check_arguments(request, settings.rrf_k, settings.recency_half_life_days)
    given = None if query_vector is None else _given_vector(query_vector)
    vector = None
    if args.uses_semantic:
        # A bad filter is reported before the model loads, with the readable set read here:
        # this check only reports, the ranking's snapshot reads both again (a search without
        # the vector channel reads them once, there). No snapshot of its own: each error comes
        # from one statement, and on PostgreSQL a BEGIN and a COMMIT are two round trips.
        resolve_scope(store, conn, readable(store, conn, principal), request.filters)
        workspace.ensure_model()
        # Outside any transaction: embedding takes milliseconds to seconds of CPU.
        vector = given if given is not None else _embed_query(workspace, args.query)
        _check_dimension(workspace, vector)
    if args.uses_lexical:
        store.search.prepare_keywords(conn)
    # One snapshot for the whole search (never blocks or is blocked by a writer), so the scope,
    # both channels and the result rows agree even while another process commits.
    with store.read_snapshot(conn):
        can_read = readable(store, conn, principal)
        scope = resolve_scope(store, conn, can_read, request.filters)
        stores = readable_stores(store, conn, can_read)
        text_tokens = workspace.text_tokens
        response = run_search(
            store,
            conn,
            args,
            scope,
            stores,
            vector,
            workspace.accelerator,
            started,
            text_tokens=None if text_tokens is None else text_tokens.of_tenant(principal.tenant_id),
        )
        if args.include_content:  # a step after ranking (kbmcp/service/inline_content.py)
            response = with_content(workspace, principal, response, args.content_limit_chars)
        return response


def _embed_query(workspace: Workspace, query: str) -> np.ndarray:
    return np.asarray(workspace.embedder.embed([query])[0], dtype=np.float32)


def _given_vector(value: Sequence[float] | np.ndarray) -> np.ndarray:
    vector = np.asarray(value, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(vector)):
        raise InvalidRequest(
            "query_vector must hold finite numbers", details={"argument": "query_vector"}
        )
    return vector


def _check_dimension(workspace: Workspace, vector: np.ndarray) -> None:
    expected = workspace.embedder.fingerprint.dimension
    if len(vector) != expected:
        raise InvalidRequest(
            f"query_vector has {len(vector)} dimensions; this file's model has {expected}",
            details={"argument": "query_vector"},
        )
