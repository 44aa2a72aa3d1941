"""A one-shot workspace (the CLI) answers from SQL alone, with the same results as the caches.

Two workspaces on one file: a long-lived one (the server: vector copy and bm25 impact cache) and
a one-shot one (vec0 / vec_distance_cosine for vectors, the Python scan or FTS5 for keywords).
Every mode and several scopes must give the same chunks in the same order, the same bm25 scores
and the same scores (sqlite-vec similarities, bm25), bit for bit: for a caller who reads every
store (the index's own keyword statistics) and for one who does not (its readable set's).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from kbmcp.access import readable
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.models import MODES, SearchFilters, SearchRequest, SearchResponse
from kbmcp.search.resolved import Scope
from kbmcp.search.scope import resolve_scope
from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths, archive_document
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.store.sqlite.search import engine, plan
from kbmcp.store.sqlite.search.scope import filter_documents, scope_chunk_ids
from kbmcp.workspace import Workspace
from tests.search_corpus import (
    QUERY,
    TARGET_PATH,
    ingest,
    write_adversarial_corpus,
    write_small_corpus,
)

QUERIES = [
    QUERY,
    "rotate keys and backups of the vector index",
    "what's sqlite-vec C++ 🚀",
    # Matches little of what it asks: hybrid cuts the keyword weight by the query's ceiling.
    "how do I bake rye bread or sourdough loaves at home without a token",
]
SCOPES = {
    "unscoped": SearchFilters(),
    "kb": SearchFilters(knowledge_base_ids=["handbook"]),
    "path": SearchFilters(document_paths=["notes/note1", TARGET_PATH]),
    "tag": SearchFilters(tags={"team": "search"}),
    "metadata": SearchFilters(metadata={"owner": "engine"}),
    "empty": SearchFilters(tags={"team": "nobody"}),
    # Whole stores, found in the accelerator's memory (not SQL) by the long-lived workspace.
    "documents_only": SearchFilters(include_memories=False),
    "memories_only": SearchFilters(include_documents=False),
    "memory_tag": SearchFilters(tags={"team": "search"}, include_documents=False),
}
MEMORIES = [
    "Remember: rotate keys before the vector index backups run.",
    "The search team keeps sqlite-vec pinned; C++ builds break otherwise.",
    "Keyword scope filters apply before ranking, then the limit.",
]


@pytest.fixture(scope="module", params=["single", "shared"])
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Workspace, Workspace]]:
    """The same corpus of the local owner, alone in its file ("single": it reads every store,
    the index's own keyword statistics apply), or beside another tenant's knowledge base and
    memories with the same words ("shared": its readable set's statistics apply,
    kbmcp/search/lexical/stats.py)."""
    root = tmp_path_factory.mktemp("one_shot")
    settings = Settings(db=root / "kb.db", embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as server:
        ingest(server, write_adversarial_corpus(root))
        ingest(server, write_small_corpus(root), kb="handbook")
        owner = server.local_principal()
        team = memories.create_memory_store(server, owner, "team", tags={"team": "search"})
        for index, text in enumerate(MEMORIES):
            store = team.memory_store_id if index % 2 else None
            memories.remember(server, owner, text, memory_store_id=store)
        if request.param == "shared":
            create_tenant(server, owner, "beta")
            beta = act_as_tenant(server, owner, "beta")
            add_paths(server, beta, [write_small_corpus(root / "beta")],
                      IngestOptions(knowledge_base="handbook"))  # fmt: skip
            for text in MEMORIES[:2]:
                memories.remember(server, beta, f"{text} {text}")
        with Workspace(settings, embedder=HashingEmbedder()) as one_shot:
            yield server, one_shot


def _search(ws: Workspace, request: SearchRequest) -> SearchResponse:
    return search(ws, ws.local_principal(), request)


def _kb_filters(ws: Workspace, filters: SearchFilters) -> SearchFilters:
    if filters.knowledge_base_ids is None:
        return filters
    kb = ws.conn.execute(
        "SELECT kb.public_id FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id "
        "WHERE kb.name = 'handbook' AND t.name = 'local'"
    ).fetchone()
    return SearchFilters(knowledge_base_ids=[kb[0]])


def _assert_same(cached: SearchResponse, one_shot: SearchResponse) -> None:
    assert [r.chunk_id for r in one_shot.results] == [r.chunk_id for r in cached.results]
    for a, b in zip(cached.results, one_shot.results, strict=True):
        assert (a.lexical_rank, a.semantic_rank) == (b.lexical_rank, b.semantic_rank)
        assert b.lexical_score == a.lexical_score
        assert b.semantic_similarity == a.semantic_similarity
        assert b.score == a.score  # one scoring (sqlite-vec, bm25) and one fusion (SQL)
        # The server finds a text's matches from its kept tokens once it was returned before
        # (search/text_tokens.py); the one-shot process anew every time.
        assert b.excerpt == a.excerpt
    assert one_shot.stats.has_more == cached.stats.has_more
    # A single channel binds only the rows its results need (store/sqlite/search/engine.py
    # `_result_rows`) and reports its whole count of candidates all the same.
    assert (one_shot.stats.lexical_candidates, one_shot.stats.semantic_candidates) == (
        cached.stats.lexical_candidates,
        cached.stats.semantic_candidates,
    )


@pytest.mark.parametrize("scope", list(SCOPES))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("depth", [3, None])
def test_one_shot_ranks_like_the_caches(
    pair: tuple[Workspace, Workspace], mode: str, scope: str, depth: int | None
) -> None:
    """Limits 2 and 20 cut inside groups of tied rows (the decoys' bm25 scores are equal)."""
    server, one_shot = pair
    filters = _kb_filters(server, SCOPES[scope])
    for query, limit in itertools.product(QUERIES, [2, 20]):
        request = SearchRequest(query, mode=mode, limit=limit, candidates=depth, filters=filters)
        cached, sql_only = _search(server, request), _search(one_shot, request)
        _assert_same(cached, sql_only)
        assert sql_only.stats.lexical_strategy in (None, "fts5")
        assert sql_only.stats.vector_strategy in (None, "sql_exact", "vec0_scan")
        assert cached.stats.lexical_strategy in (None, "scan", "postings", "fts5")
        assert cached.stats.vector_strategy in (None, "matrix_exact")
    assert one_shot.accelerator is None  # a one-shot process searches with SQL alone


@pytest.mark.parametrize("vector_pass", ["vec0_scan", "vec0_knn"])
def test_one_shot_large_scopes_use_vec0_and_fts5(
    pair: tuple[Workspace, Workspace], monkeypatch: pytest.MonkeyPatch, vector_pass: str
) -> None:
    """Scopes above the exact-scan and keyword-scan sizes: every vec0 row scored by numpy
    (vector/vec0_scan.py), or the vec0 KNN when the file's vec0 tables are not the layout the
    scan reads, with the allow-list applied before k, and FTS5's OR query, still equal to the
    caches."""
    server, one_shot = pair
    monkeypatch.setattr(plan, "VECTOR_EXACT_MAX_ROWS", 5)
    monkeypatch.setattr(plan, "LEXICAL_SCAN_MAX_ROWS", 5)
    if vector_pass == "vec0_knn":
        monkeypatch.setattr(engine, "scan_vec0", lambda conn, query: None)
    for scope in ("unscoped", "kb", "path", "tag", "metadata"):
        for mode in MODES:
            request = SearchRequest(
                QUERIES[1], mode=mode, limit=10, filters=_kb_filters(server, SCOPES[scope])
            )
            cached, sql_only = _search(server, request), _search(one_shot, request)
            _assert_same(cached, sql_only)
            if mode != "lexical":
                assert sql_only.stats.vector_strategy == vector_pass
                assert cached.stats.vector_strategy == "matrix_exact"


@pytest.mark.parametrize("keyword_pass", ["scan", "postings"])
def test_common_terms_are_dropped_alike_by_every_keyword_source(
    pair: tuple[Workspace, Workspace], monkeypatch: pytest.MonkeyPatch, keyword_pass: str
) -> None:
    """The stop-word rule (kbmcp/search/lexical/channel.py) on this small file (it applies from
    STOPWORD_MIN_ROWS chunks): the caches drop the same common terms as FTS5's query, and fall
    back to every term when as few rows remain, so the scores stay equal bit for bit. A dropped
    term adds ~1e-6 to a score: the caches once kept them, and at 100k chunks their scores
    differed from the CLI's and PostgreSQL's in the sixth decimal."""
    server, one_shot = pair
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 1)
    if keyword_pass == "postings":
        monkeypatch.setattr(plan, "LEXICAL_SCAN_MAX_ROWS", 0)
    else:  # scoped searches scan, even where earlier requests filled the postings
        monkeypatch.setattr(server.accelerator, "holds_postings", lambda *_: False)
    common = ["the of and a rotate keys", "the and of", "of the vector index backups"]
    used = set()
    for query, scope, mode, depth in itertools.product(
        common, ("unscoped", "kb", "path", "tag"), ("lexical", "hybrid"), (2, None)
    ):
        filters = _kb_filters(server, SCOPES[scope])
        request = SearchRequest(query, mode=mode, limit=10, candidates=depth, filters=filters)
        cached, sql_only = _search(server, request), _search(one_shot, request)
        _assert_same(cached, sql_only)
        used.add(cached.stats.lexical_strategy)
    assert keyword_pass in used


def test_one_shot_min_similarity(pair: tuple[Workspace, Workspace]) -> None:
    server, one_shot = pair
    for scope in ("unscoped", "path"):
        request = SearchRequest(
            QUERY, mode="semantic", min_similarity=0.3, filters=SCOPES[scope], limit=50
        )
        _assert_same(_search(server, request), _search(one_shot, request))


@pytest.mark.parametrize("exact_max_rows", [plan.VECTOR_EXACT_MAX_ROWS, 1])
def test_one_shot_floor_spares_selected_documents_only(
    pair: tuple[Workspace, Workspace], monkeypatch: pytest.MonkeyPatch, exact_max_rows: int
) -> None:
    """document_ids beside memories: the floor spares the selected document's chunks, not the
    memories', on every path (a scope big enough for the vec0 scan too, which spares rows as
    the server's matrix does)."""
    server, one_shot = pair
    monkeypatch.setattr(plan, "VECTOR_EXACT_MAX_ROWS", exact_max_rows)
    target = server.conn.execute(
        "SELECT public_id FROM document WHERE path = ?", (TARGET_PATH,)
    ).fetchone()[0]
    filters = SearchFilters(document_ids=[target], include_memories=True)
    unfloored = _search(server, SearchRequest(QUERY, mode="semantic", limit=50, filters=filters))
    similarities = sorted(r.semantic_similarity for r in unfloored.results if r.kind == "memory")
    floor = (similarities[0] + similarities[-1]) / 2  # some memories above, some below
    request = SearchRequest(QUERY, mode="semantic", min_similarity=floor, limit=50, filters=filters)
    cached, sql_only = _search(server, request), _search(one_shot, request)
    _assert_same(cached, sql_only)
    assert sql_only.stats.vector_strategy == ("vec0_scan" if exact_max_rows == 1 else "sql_exact")
    kept = [r for r in cached.results if r.kind == "memory"]
    assert kept and all(r.semantic_similarity >= floor for r in kept)
    assert len(kept) < len(similarities)
    documents = [r for r in cached.results if r.kind == "document"]
    assert documents == [r for r in unfloored.results if r.kind == "document"]
    assert any(r.semantic_similarity < floor for r in documents)  # spared, not just above


def test_stores_in_memory_equal_the_scope_sql(pair: tuple[Workspace, Workspace]) -> None:
    """The accelerator's rows of whole stores are exactly the scope SQL's chunks, for every
    subset of the stores, before and after memories are forgotten and added in place."""
    server, _ = pair
    conn = server.conn
    stores = [row[0] for row in conn.execute("SELECT id FROM knowledge_base ORDER BY id")]
    owner = server.local_principal()
    for round_ in range(2):
        assert server.accelerator is not None
        with server.accelerator.lock:
            assert server.accelerator.refresh(conn)
            vectors = server.accelerator.vectors(conn)
            for mask in range(1, 2 ** len(stores)):
                subset = [store for bit, store in enumerate(stores) if mask >> bit & 1]
                scope = Scope(readable_kb_ids=subset)
                expected = scope_chunk_ids(conn, scope)
                assert expected is not None
                assert vectors.ids_of_stores(subset).tolist() == expected.tolist(), subset
        if round_ == 0:
            forgotten = memories.list_memories(server, owner)[0].memory_id
            memories.forget(server, owner, forgotten)
            memories.remember(server, owner, "A memory written after the copy was built.")


def _filter_combinations(ws: Workspace) -> list[SearchFilters]:
    conn = ws.conn
    handbook = conn.execute("SELECT public_id FROM knowledge_base WHERE name = 'handbook'")
    kb = handbook.fetchone()[0]
    team = conn.execute("SELECT public_id FROM knowledge_base WHERE name = 'team'").fetchone()[0]
    documents = [row[0] for row in conn.execute(
        "SELECT public_id FROM document WHERE status = 'published' AND path NOT LIKE 'mem_%' "
        "ORDER BY id LIMIT 3"
    )]  # fmt: skip
    combinations = [filters for filters in SCOPES.values() if filters.knowledge_base_ids is None]
    combinations += [
        SearchFilters(knowledge_base_ids=[kb]),
        SearchFilters(knowledge_base_ids=[kb], document_paths=["notes/", "guide"]),
        SearchFilters(document_ids=documents),
        SearchFilters(document_ids=documents[:1], tags={"team": "search"}),
        SearchFilters(document_paths=["notes/note1", TARGET_PATH], tags={"team": "search"}),
        SearchFilters(document_paths=["nowhere/"]),
        SearchFilters(metadata={"owner": "engine"}, tags={"team": "search"}),
        SearchFilters(tags={"team": "search"}, include_memories=False),
        SearchFilters(tags={"team": "search"}, include_memories=True),
        SearchFilters(memory_store_ids=[team]),
        SearchFilters(memory_store_ids=[team], tags={"team": "search"}),
        SearchFilters(include_documents=False),
    ]
    return combinations


def test_filtered_scopes_in_memory_equal_the_scope_sql(pair: tuple[Workspace, Workspace]) -> None:
    """An accelerator maps a filtered scope to chunks from the filters' document ids and its
    vector copy: exactly the scope SQL's chunks, for every filter and combination, before and
    after a document and a memory leave the index and others join it in place."""
    server, _ = pair
    conn = server.conn
    owner = server.local_principal()
    for round_ in range(2):
        assert server.accelerator is not None
        with server.accelerator.lock:
            assert server.accelerator.refresh(conn)
            vectors = server.accelerator.vectors(conn)
            for filters in _filter_combinations(server):
                scope = resolve_scope(
                    server.store, conn, readable(server.store, conn, owner), filters
                )
                if scope.everything:  # no allow-list at all: nothing to map
                    continue
                expected = scope_chunk_ids(conn, scope)
                parts = [(p.stores, p.documents) for p in filter_documents(conn, scope)]
                got = vectors.ids_of_scope(parts)
                assert expected is not None and got.tolist() == expected.tolist(), filters
        if round_ == 0:
            forgotten = memories.list_memories(server, owner)[-1].memory_id
            memories.forget(server, owner, forgotten)
            memories.remember(server, owner, "Another memory, after the copy.", tags={"team": "x"})
            document = conn.execute(
                "SELECT public_id FROM document WHERE path = 'notes/note1.md'"
            ).fetchone()
            if document is not None:
                archive_document(server, owner, document[0])
