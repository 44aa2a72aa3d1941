"""The Citus tier (issue 35): kbmcp on a real cluster, a coordinator and two workers started
here from the Citus build named by KBMCP_TEST_CITUS_TARBALL (tests/citus_cluster.py; skipped,
saying why, without one).

- the migration distributes the tables: reference tables and tables co-located by store;
- every search answers on the cluster what one PostgreSQL server holding the same data
  answers: every mode, every kind of scope, phrases, the similarity floor, memories with decay,
  a tenant who reads other tenants' stores (keyword statistics summed over shards);
- a search within one store is one task on one shard; a search over several stores reads
  their shards only; a filtered HNSW search on a shard finds k rows (the search's settings
  reach the workers);
- under concurrent shares and revokes no search returns a store outside the readable set;
- two `kbmcp serve --http` processes on the coordinator see each other's writes, shares,
  revokes and token revocations (tests/test_multi_server.py's tests, run here on the cluster);
- `kbmcp copy` fills a cluster and empties it back into a file with the same searches;
- `kbmcp doctor` shows the nodes and what each holds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.server.app import build_server
from kbmcp.service.search import search
from kbmcp.service.tenants import share_knowledge_base, unshare_knowledge_base
from kbmcp.store.copy import copy_store
from kbmcp.store.postgres import citus, keyword_channel, migrations, plan_choice, prelude
from kbmcp.store.postgres.connection import connect
from kbmcp.workspace import Workspace
from tests.access_support import build_two_tenants
from tests.citus_cluster import CitusCluster, remove_stale_clusters, skip_reason, tarball
from tests.cli_support import Run
from tests.mcp_support import hash_workspace, payload, pinned_clock, write
from tests.postgres_fixtures import RUN_ID, server_root
from tests.postgres_search import (
    MODES,
    QUERIES,
    SEARCHED_AT,
    answer,
    build_rich_corpus,
    parity_requests,
    principal_of,
)
from tests.ranked_output import stable

# The multi-server tests, collected here too: they take `servers` from this module, two HTTP
# servers on the cluster.
from tests.test_multi_server import (  # noqa: F401 (tests collected here)
    Servers,
    test_a_document_added_is_found_by_both_servers_on_their_next_request,
    test_a_memory_remembered_on_one_server_is_found_and_forgotten_on_the_other,
    test_a_share_and_its_end_reach_both_servers_on_their_next_request,
    test_a_token_revoked_is_refused_by_both_servers_on_their_next_request,
    two_servers,
)
from tests.test_postgres_trigger_plans import SETTING as TRIGGER_PLANS
from tests.test_postgres_trigger_plans import TRIGGER_FUNCTIONS

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason())),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[CitusCluster]:
    """A coordinator and two workers for this module (in memory where /dev/shm exists)."""
    build = tarball()
    assert build is not None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    root = server_root() / f"kbmcp-test-citus-{os.getuid()}" / f"{RUN_ID}-{worker}"
    root.parent.mkdir(mode=0o755, exist_ok=True)
    remove_stale_clusters(root.parent, keep=root)
    made = CitusCluster(root)
    made.install(build)
    try:
        made.start(workers=2)
        yield made
    finally:
        made.stop()
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ the schema


def test_the_migration_makes_reference_tables_and_distributes_the_rest_by_store(
    cluster: CitusCluster,
) -> None:
    url = cluster.new_database("kbmcp_schema")
    connect(url).close()
    with psycopg.connect(url) as conn:
        kinds = dict(
            conn.execute(
                "SELECT logicalrelid::regclass::text, partmethod FROM pg_dist_partition"
            ).fetchall()
        )
        columns = {
            table: column
            for table, column in conn.execute(
                "SELECT logicalrelid::regclass::text, column_to_column_name(logicalrelid,"
                " partkey) FROM pg_dist_partition WHERE partmethod = 'h'"
            )
        }
        groups = {
            row[0]
            for row in conn.execute(
                "SELECT colocationid FROM pg_dist_partition WHERE partmethod = 'h'"
            )
        }
    assert {t for t, kind in kinds.items() if kind == "n"} == set(citus.REFERENCE_TABLES)
    assert set(columns) == set(citus.DISTRIBUTED_TABLES)
    assert set(columns.values()) == {"knowledge_base_id"}
    assert len(groups) == 1  # all co-located
    assert "audit_event" not in kinds  # the coordinator's own table (citus.py says why)


def test_a_distributed_database_takes_the_document_chunk_ranges_on_upgrade(
    cluster: CitusCluster,
) -> None:
    """A cluster distributed at schema 9 upgraded to the latest (migration 10: columns, an
    index and row triggers added to distributed tables; 11: the trigger functions' settings):
    existing documents get their ranges, the triggers keep them on the shards as chunks go out
    and documents change revision, and the workers' trigger functions, which run on the shards,
    are planned at each call as the coordinator's are."""
    from kbmcp.store.postgres.id_key import ensure_id_key
    from tests.test_postgres_revision_ranges import _mismatches
    from tests.test_postgres_scope_runs import _documents

    url = cluster.new_database("kbmcp_upgrade")
    with psycopg.connect(url, autocommit=True) as conn:
        migrations.migrate(conn, target=9)
        with conn.transaction():
            ensure_id_key(conn)  # as a database made at schema 9 has it
            citus.distribute(conn)
        with conn.transaction():
            _documents(conn)
        assert migrations.migrate(conn) == [10, 11]
        assert _mismatches(conn) == []
        conn.execute("DELETE FROM chunk WHERE knowledge_base_id = 2 AND id IN (21, 30)")
        conn.execute("UPDATE document SET current_revision_id = 3 "
                     "WHERE knowledge_base_id = 2 AND id = 4")  # fmt: skip
        assert _mismatches(conn) == []
        four = conn.execute("SELECT current_first_chunk_id, current_last_chunk_id, "
                            "current_chunk_count FROM document WHERE knowledge_base_id = 2 "
                            "AND id = 4").fetchone()  # fmt: skip
        assert four == (22, 25, 4)
    for worker in cluster.workers:
        with psycopg.connect(worker.admin_url("kbmcp_upgrade"), autocommit=True) as conn:
            functions = dict(conn.execute(TRIGGER_FUNCTIONS).fetchall())
        assert "revision_chunk_range_update" in functions
        assert all(TRIGGER_PLANS in (config or []) for config in functions.values()), functions


# ------------------------------------------------------------------ search parity


@dataclass
class Parity:
    plain: Workspace  # one PostgreSQL server
    sharded: Workspace  # the cluster
    compared: int = 0


@pytest.fixture(scope="module")
def parity(
    cluster: CitusCluster, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Parity]:
    """The rich corpus (three tenants, shares, memories) copied into one PostgreSQL server and
    into the cluster: the same rows and ids on both."""
    root = tmp_path_factory.mktemp("citus-parity")
    source = root / "all.db"
    build_rich_corpus(root / "files", source)
    sharded_url = cluster.new_database("kbmcp_parity")
    copy_store(str(source), postgres_url, force=True)
    copy_store(str(source), sharded_url, force=True)
    plain = Workspace(Settings(db=postgres_url, embedder="hash"), embedder=HashingEmbedder())
    sharded = Workspace(Settings(db=sharded_url, embedder="hash"), embedder=HashingEmbedder())
    try:
        yield Parity(plain, sharded)
    finally:
        plain.close()
        sharded.close()


@pytest.fixture
def _pruning_on_small_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop words are pruned from 1000 indexed chunks on; this corpus is smaller, so the
    threshold is lowered to compare the pruned path and its fallback too."""
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 5)


@pytest.mark.usefixtures("_pruning_on_small_indexes")
@pytest.mark.parametrize("tenant", [None, "acme"])
def test_every_search_answers_as_one_server_does(parity: Parity, tenant: str | None) -> None:
    """Every mode x every kind of scope x the query set, and the VARIANTS: the same results
    (ids, order, scores to 6 decimals, the channels' ranks and scores) and the same statistics
    (strategies, candidates found, scope size). The local tenant reads its own stores; acme
    its own and beta's shared one, on other shards (statistics summed across them)."""
    compared = 0
    for request in parity_requests(parity.plain, tenant):
        want = answer(parity.plain, tenant, request)
        assert answer(parity.sharded, tenant, request) == want, request
        compared += 1
    print(f"\n{tenant or 'local'}: {compared} searches identical on one server and the cluster")


def test_keyword_statistics_are_summed_over_the_readable_stores_shards(parity: Parity) -> None:
    """acme reads its own stores and beta's shared one, on other shards: bm25's N and n are
    the readable set's, as one server computes them."""
    stores = parity.plain.conn.execute(
        "SELECT array_agg(kb.id ORDER BY kb.id) FROM knowledge_base AS kb"
        " JOIN tenant AS t ON t.id = kb.tenant_id WHERE t.name IN ('acme', 'beta')"
    ).fetchone()[0]
    with psycopg.connect(parity.sharded.settings.db) as conn:
        shards = {
            row[0]
            for row in conn.execute(
                "SELECT get_shard_id_for_distribution_column('keyword_total', id)"
                " FROM unnest(%s::bigint[]) AS id",
                (stores,),
            )
        }
    assert len(shards) > 1  # the readable set spans shards
    terms = ["error", "budget", "vector", "zanzibar"]
    one = keyword_channel.keyword_stats_for(parity.plain.conn, terms, stores)
    summed = keyword_channel.keyword_stats_for(parity.sharded.conn, terms, stores)
    assert summed == one and summed.rows > 0


async def _calls(ws: Workspace, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each tool call's answer from an in-process server on `ws` (the local tenant)."""
    async with Client(build_server(ws)) as client:
        return [stable(payload(await client.call_tool(tool, args))) for tool, args in calls]


async def test_every_tool_answers_as_one_server_does(parity: Parity) -> None:
    """Listing, paging and filtering documents, reads (windows, outlines, older revisions),
    chunk fetches, scans and memory stores: the cluster answers what one server answers."""
    with pinned_clock(SEARCHED_AT):
        found = await _calls(parity.plain, [("list_documents", {"limit": 100})])
        documents = [d["document_id"] for d in found[0]["documents"]]
        hits = await _calls(
            parity.plain, [("search_knowledge", {"query": "vector index", "limit": 20})]
        )
        chunks = [hit["chunk_id"] for hit in hits[0]["results"]]
        assert documents and chunks
        calls: list[tuple[str, dict[str, Any]]] = [
            ("list_knowledge_bases", {}),
            ("list_memory_stores", {}),
            ("list_documents", {"limit": 2}),
            ("list_documents", {"path_prefix": "ops/"}),
            ("list_documents", {"tags": {"topic": "ops"}}),
            ("search_knowledge", {"chunk_ids": [*chunks[:5], "chk_0000000000000000"]}),
            ("search_knowledge", {}),
            ("search_knowledge", {"since": "2026-01-02T00:00:00Z"}),
            ("search_knowledge", {"filters": {"include_documents": False}}),
        ]
        for document in documents:
            calls += [
                ("search_knowledge", {"document_id": document, "limit_chars": 200}),
                ("search_knowledge", {"document_id": document, "outline": True}),
            ]
        want = await _calls(parity.plain, calls)
        assert await _calls(parity.sharded, calls) == want
        first = await _calls(parity.plain, [("list_documents", {"limit": 2})])
        cursor = first[0]["next_cursor"]
        assert cursor
        paged = [("list_documents", {"cursor": cursor, "limit": 10})]
        assert await _calls(parity.sharded, paged) == await _calls(parity.plain, paged)


def test_the_bounded_keyword_plan_runs_store_by_store_as_one_server(
    parity: Parity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounded plan (a large unscoped search: each kept token's best postings per store)
    over several stores on the cluster: one statement per store, each a router query. With
    lists and rescored candidates large enough to hold every posting the plan is exact, so
    the cluster answers as one server (before, Citus refused the per-store statement: "cannot
    push down this subquery", a LATERAL with LIMIT over the list of stores)."""
    monkeypatch.setattr(plan_choice, "VECTOR_EXACT_MAX_ROWS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_MIN_POSTINGS", 0)
    monkeypatch.setattr(plan_choice, "BOUNDED_LIST_SIZE", 100_000)
    monkeypatch.setattr(plan_choice, "BOUNDED_RESCORED_PER_DEPTH", 100_000)
    bounded = 0
    for tenant in (None, "acme"):
        for query in ("vector index", "restore the database backup", "database vector"):
            # Two candidates: the corpus is small, and the plan needs a token with more rows
            # than the depth.
            request = SearchRequest(query=query, mode="lexical", limit=2, candidates=2)
            want = answer(parity.plain, tenant, request)
            assert want["results"], request
            assert answer(parity.sharded, tenant, request) == want, request
            bounded += want["stats"]["lexical_strategy"] == "approximate"  # postings_bounded
    assert bounded >= 4


# ------------------------------------------------------------------ where a search runs


class _Statements:
    """The statements a search sends (recorded from psycopg's Cursor.execute, which
    Connection.execute calls too), to EXPLAIN them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, Any]] = []
        original = psycopg.Cursor.execute

        def execute(cursor: Any, query: Any, params: Any = None, **options: Any) -> Any:
            self.seen.append((str(query), params))
            return original(cursor, query, params, **options)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)


DISTRIBUTED = re.compile(r"\b(" + "|".join(citus.DISTRIBUTED_TABLES) + r")\b")


def _tasks(url: str, statements: list[tuple[str, Any]]) -> list[tuple[list[int], set[int], str]]:
    """For each statement that reads a distributed table: the task counts in its plan, the
    shards it reads (EXPLAIN VERBOSE names each shard table), and the statement."""
    plans = []
    conn = connect(url, migrate=False)
    try:
        for sql, params in statements:
            if (
                not DISTRIBUTED.search(sql)
                or ";" in sql
                or sql.lstrip().upper().startswith(("SET", "BEGIN", "COMMIT"))
            ):
                continue
            text = "\n".join(row[0] for row in conn.execute(f"EXPLAIN (VERBOSE) {sql}", params))
            counts = [int(n) for n in re.findall(r"Task Count: (\d+)", text)]
            shards = {int(n) for n in re.findall(r"\b[a-z_]+_(\d{6,})\b", text)}
            plans.append((counts, shards, sql))
    finally:
        conn.close()
    return plans


def _shards_of(url: str, stores: list[int]) -> set[int]:
    """Every shard (of every table, reference tables included) that holds the stores' rows."""
    with psycopg.connect(url) as conn:
        wanted = {
            row[0]
            for row in conn.execute(
                "SELECT get_shard_id_for_distribution_column(t, s)"
                " FROM unnest(%s::regclass[]) AS t, unnest(%s::bigint[]) AS s",
                (list(citus.DISTRIBUTED_TABLES), stores),
            )
        }
        wanted |= {
            row[0]
            for row in conn.execute(
                "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = ANY(%s::regclass[])",
                (list(citus.REFERENCE_TABLES),),
            )
        }
    return wanted


def _stores_of(ws: Workspace, tenants: list[str]) -> list[int]:
    return [
        row[0]
        for row in ws.conn.execute(
            "SELECT kb.id FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id"
            " WHERE t.name = ANY(%s)",
            (tenants,),
        )
    ]


def test_a_search_within_one_store_is_one_task_on_its_shard(
    parity: Parity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """beta reads one store (its knowledge base): every statement of its searches is a router
    query, one task on that store's shard."""
    url = str(parity.sharded.settings.db)
    allowed = _shards_of(url, _stores_of(parity.sharded, ["beta"]))
    recorder = _Statements(monkeypatch)
    for mode in MODES:
        for filters in (SearchFilters(), SearchFilters(document_paths=["onboarding"])):
            request = SearchRequest(query="narwhal badge", mode=mode, filters=filters)
            assert search(parity.sharded, principal_of(parity.sharded, "beta"), request).results
    monkeypatch.undo()
    plans = _tasks(url, recorder.seen)
    assert plans
    for counts, shards, sql in plans:
        assert counts and set(counts) == {1}, (counts, sql)
        assert shards <= allowed, sql


def test_a_search_over_several_stores_reads_only_their_shards(
    parity: Parity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme reads four stores (its two knowledge bases, its memories, beta's shared one): each
    store's channels statement is one task, and nothing reads another tenant's shards."""
    url = str(parity.sharded.settings.db)
    acme = parity.sharded.conn.execute(
        "SELECT array_agg(kb.id) FROM knowledge_base AS kb JOIN tenant AS t"
        " ON t.id = kb.tenant_id WHERE t.name = 'acme'"
        " OR kb.name = 'beta-docs'"
    ).fetchone()[0]
    allowed = _shards_of(url, acme)
    recorder = _Statements(monkeypatch)
    for mode in MODES:
        for filters in (SearchFilters(), SearchFilters(tags={"topic": "ops"})):
            request = SearchRequest(query="error budget zanzibar", mode=mode, filters=filters)
            search(parity.sharded, principal_of(parity.sharded, "acme"), request)
    monkeypatch.undo()
    channels = [(sql, params) for sql, params in recorder.seen if "semantic_pool" in sql]
    assert channels
    for counts, _shards, sql in _tasks(url, channels):
        assert counts == [1], sql
    for _counts, shards, sql in _tasks(url, recorder.seen):
        assert shards <= allowed, sql


def test_a_search_of_one_named_knowledge_base_reads_only_its_shard(
    parity: Parity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme reads four stores; a knowledge_base_ids filter naming one of them searches that
    store alone: one channels statement, one task on that store's shard (before, one per
    readable store, its scope read over every one of them and its ids resolved by pulling
    the readable stores' documents to the coordinator); the answers are one server's."""
    url = str(parity.sharded.settings.db)
    # acme's knowledge base with the most documents (one server's copy: the same ids)
    chosen_id, chosen = parity.plain.conn.execute(
        "SELECT kb.id, kb.public_id FROM knowledge_base AS kb JOIN tenant AS t"
        " ON t.id = kb.tenant_id WHERE t.name = 'acme' AND kb.kind = 'documents'"
        " ORDER BY (SELECT count(*) FROM document AS d WHERE d.knowledge_base_id = kb.id) DESC,"
        " kb.id LIMIT 1"
    ).fetchone()
    allowed = _shards_of(url, [chosen_id])
    requests = [
        SearchRequest(query=query, mode=mode, filters=SearchFilters(knowledge_base_ids=[chosen]))
        for mode in MODES
        for query in ("error budget zanzibar", "the of and a")  # the second: pruned terms
    ]
    wanted = [answer(parity.plain, "acme", request) for request in requests]
    recorder = _Statements(monkeypatch)  # the cluster's statements only
    compared = 0
    for request, want in zip(requests, wanted, strict=True):
        got = answer(parity.sharded, "acme", request)
        assert got == want, request
        assert got["stats"]["scope_chunks"], request  # a scope with rows
        compared += 1
    monkeypatch.undo()
    assert compared == 2 * len(MODES)
    channels = [(sql, params) for sql, params in recorder.seen if "semantic_pool" in sql]
    assert len(channels) == compared  # one channels statement a search: the named store's
    scope_reads = [sql for sql, _ in recorder.seen if "scope_document" in sql]
    assert len(scope_reads) == compared  # its scope read in that store only
    for counts, shards, sql in _tasks(url, channels):
        assert counts == [1] and shards <= allowed, sql


# ------------------------------------------------------------------ a filtered HNSW search


def test_a_filtered_hnsw_search_on_a_shard_finds_k_rows(
    cluster: CitusCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty tenants' knowledge bases, the same manual in each, on one shard: a tenant's
    unscoped vector search takes the shard's HNSW index, filtered to its store. With the
    search's settings on the workers (iterative scans, the search's breadth) it finds every
    row it asks for; with pgvector's defaults there it stops at the candidates its breadth
    found, most of them other tenants' copies."""
    url = cluster.new_database("kbmcp_hnsw", settings={"citus.shard_count": "1"})
    tenants = [f"t{i:02d}" for i in range(20)]
    sections = "\n\n".join(f"## Part {n}\n\nPart {n} of the manual, page {n * 7}." for n in
                           range(24))  # fmt: skip
    with hash_workspace(url) as ws:
        from kbmcp.service.ingest import IngestOptions, add_paths
        from kbmcp.service.tenants import act_as_tenant, create_tenant

        admin = ws.local_principal()
        for tenant in tenants:
            create_tenant(ws, admin, tenant)
            folder = write(tmp_path / tenant, {"manual.md": f"# Manual of {tenant}\n\n{sections}"})
            add_paths(ws, act_as_tenant(ws, admin, tenant), [folder],
                      IngestOptions(knowledge_base="manual"))  # fmt: skip
    monkeypatch.setattr(plan_choice, "VECTOR_EXACT_MAX_ROWS", 0)  # the HNSW plan at this size
    # ... and on the shards, whose planners would read five hundred rows exactly instead
    for worker in cluster.workers:
        with psycopg.connect(worker.admin_url(), autocommit=True) as conn:
            for plan in ("seqscan", "bitmapscan", "sort"):
                conn.execute(f"ALTER DATABASE kbmcp_hnsw SET enable_{plan} = off")
    ws = Workspace(Settings(db=url, embedder="hash"), embedder=HashingEmbedder())
    try:
        principal = principal_of(ws, "t07")
        request = SearchRequest(query="part of the manual", mode="semantic", limit=20)
        response = search(ws, principal, request)
        assert response.stats.vector_strategy == "pg_hnsw"
        assert len(response.results) == 20
        on_worker = (
            "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
            " FROM chunk_vec WHERE knowledge_base_id = %s LIMIT 1"
        )
        store = ws.conn.execute(
            "SELECT kb.id FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id"
            " WHERE t.name = 't07'"
        ).fetchone()[0]
        with ws.store.read_snapshot(ws.conn):
            citus.set_search_settings(ws.conn, 400)
            assert ws.conn.execute(on_worker, (store,)).fetchone() == ("400", "relaxed_order")
        # Without them, pgvector's defaults on the worker: SET LOCAL sent nowhere, and the
        # first statement's set_config() (which runs on the worker when the whole statement is
        # routed there, as here) left out
        monkeypatch.setattr(citus, "SEARCH_SETTINGS", "SELECT 1")
        monkeypatch.setattr(
            prelude, "SEARCH_SETTINGS", "set_config('enable_mergejoin', 'off', true), 1, 1"
        )
        with ws.store.read_snapshot(ws.conn):
            assert ws.conn.execute(on_worker, (store,)).fetchone() == ("40", "off")
        fewer = search(ws, principal, request)
        assert fewer.stats.vector_strategy == "pg_hnsw"
        assert len(fewer.results) < 20
    finally:
        ws.close()


# ------------------------------------------------------------------ shares and revokes


def test_no_search_returns_a_store_outside_the_readable_set_under_shares_and_revokes(
    parity: Parity,
) -> None:
    """One thread shares beta's knowledge base with acme and revokes it, again and again, while
    another searches as acme: a result from beta's store comes only from a search during which
    the share was in force at some moment, and nothing ever comes from a store acme cannot
    read (the local tenant's). Each node has its own snapshot (docs/scale-out.md): the
    readable set is read on the coordinator first, so a search sees a share or a revoke whole,
    as of the moment it read the readable set."""
    ws = parity.sharded
    url = str(ws.settings.db)
    beta_docs = ws.conn.execute(
        "SELECT public_id FROM knowledge_base WHERE name = 'beta-docs'"
    ).fetchone()[0]
    local = {
        row[0]
        for row in ws.conn.execute(
            "SELECT kb.public_id FROM knowledge_base AS kb JOIN tenant AS t"
            " ON t.id = kb.tenant_id WHERE t.name = 'local'"
        )
    }
    changes: list[tuple[float, bool]] = [(time.monotonic(), True)]  # shared by the corpus
    stop = threading.Event()

    def toggle() -> None:
        other = Workspace(Settings(db=url, embedder="hash"), embedder=HashingEmbedder())
        try:
            shared = True
            while not stop.is_set():
                if shared:
                    unshare_knowledge_base(other, other.local_principal(), "beta-docs",
                                           tenant="acme")  # fmt: skip
                else:
                    share_knowledge_base(other, other.local_principal(), "beta-docs",
                                         tenant="acme")  # fmt: skip
                shared = not shared
                changes.append((time.monotonic(), shared))
        finally:
            share_knowledge_base(other, other.local_principal(), "beta-docs", tenant="acme")
            other.close()

    thread = threading.Thread(target=toggle)
    thread.start()
    searches: list[tuple[float, float, set[str]]] = []
    try:
        principal = principal_of(ws, "acme")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline or len(searches) < 20:
            started = time.monotonic()
            for mode in ("lexical", "hybrid"):
                response = search(ws, principal, SearchRequest(query="narwhal zanzibar vector",
                                                               mode=mode))  # fmt: skip
                stores = {r.knowledge_base_id for r in response.results}
                searches.append((started, time.monotonic(), stores))
    finally:
        stop.set()
        thread.join()
    assert len(changes) > 4, "the shares did not change during the searches"
    assert local  # stores acme never reads
    saw_beta = 0
    for started, ended, stores in searches:
        assert not stores & local
        if beta_docs in stores:
            saw_beta += 1
            assert _shared_during(changes, started, ended), (started, ended)
    assert saw_beta  # some searches ran while the share was in force


def _shared_during(changes: list[tuple[float, bool]], started: float, ended: float) -> bool:
    """Whether the share was in force at some moment in [started, ended]: its state when the
    search started (the last change before), or any change during it."""
    before = [shared for moment, shared in changes if moment <= started]
    during = [shared for moment, shared in changes if started < moment <= ended]
    # A change is recorded just after its commit: it may have committed up to one change
    # earlier than recorded, so the state before the last recorded change counts too.
    return bool((before and (before[-1] or (len(before) > 1 and before[-2]))) or any(during))


# ------------------------------------------------------------------ two servers


@pytest.fixture(scope="module")
def servers(cluster: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """Two HTTP servers on the coordinator, holding tenants acme and beta and their tokens
    (tests/test_multi_server.py's fixture, on the cluster)."""
    root = tmp_path_factory.mktemp("citus-multi")
    source = root / "kb.db"
    build_two_tenants(root / "files", source)
    db = cluster.new_database("kbmcp_servers")
    copy_store(str(source), db, force=True)
    with two_servers(db) as running:
        yield running


# ------------------------------------------------------------------ copy and doctor


def _cli_searches(kbmcp: Callable[..., Run], db: Path | str) -> list[Any]:
    """`kbmcp search --json` of every query in every mode, unscoped and scoped, without the
    timing and the strategies (a file's and a database's name their ways of finding)."""
    found = []
    for mode in MODES:
        for query in QUERIES:
            for extra in ([], ["--path", "ops/"], ["--tag", "topic=ops"]):
                with pinned_clock(SEARCHED_AT):
                    run = kbmcp("--db", db, "search", query, "--mode", mode, "--json", *extra)
                assert run.code == 0, run.err
                body = json.loads(run.out)
                for key in ("elapsed_ms", "lexical_strategy", "vector_strategy"):
                    body["stats"].pop(key)
                found.append(body)
    return found


def test_kbmcp_copy_fills_a_cluster_and_copies_it_back_to_a_file(
    cluster: CitusCluster, kbmcp: Callable[..., Run], tmp_path: Path
) -> None:
    source = tmp_path / "kb.db"
    build_rich_corpus(tmp_path / "files", source)
    url = cluster.new_database("kbmcp_copy")
    into = kbmcp("copy", source, url)
    assert into.code == 0, into.err
    back = tmp_path / "back.db"
    out = kbmcp("copy", url, back)
    assert out.code == 0, out.err
    assert _cli_searches(kbmcp, back) == _cli_searches(kbmcp, source)
    assert _cli_searches(kbmcp, url) == _cli_searches(kbmcp, source)


def test_export_and_import_on_a_cluster_as_from_a_file(
    cluster: CitusCluster, kbmcp: Callable[..., Run], tmp_path: Path
) -> None:
    """`kbmcp export` reads every store's rows by store (router queries on the shards) and
    writes what a file's export writes, byte for byte; `kbmcp import` fills a new cluster
    database that exports the same again."""
    source = tmp_path / "kb.db"
    build_rich_corpus(tmp_path / "files", source)
    sharded_url = cluster.new_database("kbmcp_export")
    run = kbmcp("copy", source, sharded_url)
    assert run.code == 0, run.err
    from_file, from_cluster, again = (tmp_path / n for n in ("f.jsonl", "c.jsonl", "a.jsonl"))
    flags = ("--with-vectors", "--with-tenants")
    for db, out in ((source, from_file), (sharded_url, from_cluster)):
        run = kbmcp("--db", db, "export", "-o", out, *flags)
        assert run.code == 0, run.err
    assert from_cluster.read_bytes() == from_file.read_bytes()
    fresh = cluster.new_database("kbmcp_import")
    run = kbmcp("--db", fresh, "import", from_cluster)
    assert run.code == 0, run.err
    run = kbmcp("--db", fresh, "export", "-o", again, *flags)
    assert run.code == 0, run.err
    assert again.read_bytes() == from_file.read_bytes()


def test_doctor_shows_the_nodes_and_what_each_holds(
    parity: Parity, kbmcp: Callable[..., Run]
) -> None:
    url = str(parity.sharded.settings.db)
    run = kbmcp("--db", url, "doctor")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    header = next(line for line in lines if line.startswith("Citus "))
    assert header.endswith("on 3 nodes (tables distributed by store)")
    nodes = [line for line in lines if re.match(r"  (coordinator|worker) ", line)]
    assert [line.split()[0] for line in nodes] == ["coordinator", "worker", "worker"]
    held = [tuple(map(int, re.findall(r"(\d+) (?:stores?|chunks?)", line))) for line in nodes]
    with psycopg.connect(url) as conn:
        stores = conn.execute("SELECT count(*) FROM knowledge_base").fetchone()[0]
        chunks = conn.execute("SELECT count(*) FROM chunk").fetchone()[0]
    assert sum(s for s, _ in held) == stores
    assert sum(c for _, c in held) == chunks
    assert all(s > 0 for s, _ in held[1:])  # both workers hold stores
    report = kbmcp("--db", url, "doctor", "--json")
    assert '"nodes"' in report.out
