"""The bench's corpus on a Citus cluster of two workers on this machine, split into stores:
a search of one store (a router query: one shard) against a search of every store (fan-out:
every shard holding one), hybrid and semantic, with recall@10 against the cluster's exact plan.

    python bench/search.py --chunks 1000000 --postgres-only --db postgresql://…/bench1m \\
        --vectors shaped --build-only                       # the corpus, on one server (once)
    python bench/citus_search.py --chunks 1000000 --vectors shaped \\
        --source postgresql://…/bench1m --root /var/tmp/kbmcp-citus --citus CITUS_TARBALL

The cluster (a coordinator and two workers under --root) is kept between runs: the first run
loads the corpus from --source, a database bench/search.py built with the same corpus options
(--chunks, --vectors, --shape, ...), whose rows are streamed as they are (binary COPY, no
re-tokenising) with every document put in store `bench-(n mod --stores)`; the keyword totals
are recounted per store, then the postings' indexes and the HNSW index (one per shard) are
built. Later runs reopen the cluster and measure. `--load-only` stops after the load.

Every store's rows are on one shard (tables are distributed by store), so a one-store search
runs on one worker, and an all-stores search on every shard holding a store, in parallel over
the workers, merged on the coordinator. The measured queries of the one-store cell are drawn
from that store's documents; the all-stores cell's from every document, as bench/search.py's
unscoped cell.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import postgres_search  # noqa: E402
import search as bench  # noqa: E402

from kbmcp.config import Settings  # noqa: E402
from kbmcp.embed.hashing import HashingEmbedder  # noqa: E402
from kbmcp.search.models import SearchFilters, SearchRequest  # noqa: E402
from kbmcp.store.postgres.connection import connect  # noqa: E402
from kbmcp.store.postgres.id_key import id_key_of  # noqa: E402
from kbmcp.store.postgres.vectors import build_index, has_index, record_model  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402
from tests.citus_cluster import TARBALL_ENV, CitusCluster  # noqa: E402

# Each node's memory for a million chunks on a 24 GB machine (the source server, if running,
# holds its own): the workers' shared buffers hold their shards' HNSW graphs (~1 GB each).
BENCH_SETTINGS = """
shared_buffers = '2GB'
maintenance_work_mem = '2GB'
max_parallel_maintenance_workers = 0
work_mem = '64MB'
max_wal_size = '1GB'
"""
STORE_NAME = "bench-{n}"
# Rows of the source's postings read per COPY (one transaction each: progress, and a failure
# costs one batch).
POSTING_BATCH_CHUNKS = 50_000

# In the source database (a temporary table per session): each document's and chunk's store
# on the cluster. Documents go round-robin by their number, so every store holds every kind
# of document (every path scope, every vector cluster).
SOURCE_DOCUMENT_STORE = """
CREATE TEMP TABLE document_store AS
SELECT id AS document_id,
       ((id - (SELECT min(id) FROM document)) %% %(stores)s + 1)::bigint AS knowledge_base_id
FROM document
"""
SOURCE_CHUNK_STORE = """
CREATE TEMP TABLE chunk_store AS
SELECT c.id AS chunk_id, s.knowledge_base_id
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document_store AS s ON s.document_id = r.document_id
"""
SOURCE_COLUMNS = """
SELECT column_name FROM information_schema.columns
WHERE table_schema = 'public' AND table_name = %(table)s
ORDER BY ordinal_position
"""
# Each table's rows and how a row finds its store: (table, the row's column, the store table
# of the source session and its column).
STREAMED = (
    ("document", "id", "document_store", "document_id"),
    ("document_tag", "document_id", "document_store", "document_id"),
    ("document_metadata", "document_id", "document_store", "document_id"),
    ("revision", "document_id", "document_store", "document_id"),
    ("chunk", "id", "chunk_store", "chunk_id"),
    ("chunk_vec", "chunk_id", "chunk_store", "chunk_id"),
    ("chunk_keyword", "chunk_id", "chunk_store", "chunk_id"),
    ("chunk_term", "chunk_id", "chunk_store", "chunk_id"),
)
# The bulk load writes the rows the triggers would derive (keyword totals) itself, once, and
# the rows of every table are consistent by construction: replica mode skips user triggers and
# foreign-key checks. A plain SET LOCAL stays on the coordinator; with
# citus.propagate_set_commands = 'local' first, Citus sends it to every worker the COPY opens
# a connection to.
BULK_MODE = """SET LOCAL citus.propagate_set_commands = 'local';
SET LOCAL session_replication_role = replica"""
COUNT_KEYWORD_TOKENS = """
INSERT INTO keyword_token (token, knowledge_base_id, rows)
SELECT token, knowledge_base_id, count(*) FROM chunk_term GROUP BY token, knowledge_base_id
"""
COUNT_KEYWORD_TOTALS = """
INSERT INTO keyword_total (knowledge_base_id, rows, tokens)
SELECT knowledge_base_id, count(*), sum(title_tokens + heading_tokens + body_tokens)
FROM chunk_keyword GROUP BY knowledge_base_id
"""
INSERT_STORE = """
INSERT INTO knowledge_base (id, public_id, tenant_id, name, kind, created_at, updated_at)
OVERRIDING SYSTEM VALUE
VALUES (%(id)s, %(public_id)s, %(tenant_id)s, %(name)s, 'documents', %(now)s, %(now)s)
"""
COUNT_STORES = "SELECT count(*) FROM knowledge_base WHERE name LIKE 'bench-%'"
STORE_PUBLIC_ID = "SELECT public_id FROM knowledge_base WHERE name = %(name)s"


def main() -> None:
    parser = bench.arguments(__doc__.splitlines()[0])
    parser.add_argument("--source", help="A PostgreSQL database bench/search.py built (the "
                        "first run loads the cluster from it).")  # fmt: skip
    parser.add_argument("--root", type=Path, required=True,
                        help="The cluster's folder (kept: later runs reopen it).")  # fmt: skip
    parser.add_argument("--citus", type=Path, default=os.environ.get(TARBALL_ENV),
                        help=f"The Citus build (default: ${TARBALL_ENV}).")  # fmt: skip
    parser.add_argument("--stores", type=int, default=8,
                        help="Stores the documents are dealt into (round-robin).")  # fmt: skip
    parser.add_argument("--load-only", action="store_true")
    args = parser.parse_args()
    if args.citus is None or not Path(args.citus).is_file():
        raise SystemExit(f"a Citus build is needed: --citus PATH or {TARBALL_ENV}")
    postgres_search.apply_plan_settings(args)
    cluster = CitusCluster(args.root, extra_settings=BENCH_SETTINGS)
    cluster.install(args.citus)
    if not cluster.reopen():
        cluster.start(workers=2)
    try:
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            stores = _held_stores(conn)
            finished = has_index(conn)
        if stores and not finished:
            raise SystemExit(f"an earlier load into {args.root} did not finish: remove it first")
        if stores == 0:
            if not args.source:
                raise SystemExit("the cluster holds no corpus: --source names the database to load")
            load(args.source, cluster.url, args.stores)
        elif stores != args.stores:
            raise SystemExit(f"the cluster holds {stores} stores, not --stores {args.stores}")
        if not args.load_only:
            measure(args, cluster.url)
    finally:
        cluster.shut_down()


def _held_stores(conn: psycopg.Connection[Any]) -> int:
    try:
        return int(conn.execute(COUNT_STORES).fetchone()[0])
    except psycopg.errors.UndefinedTable:
        return 0


# ------------------------------------------------------------------ the load


def load(source_url: str, url: str, stores: int) -> None:
    """The source's corpus into the cluster's empty kbmcp schema, dealt into `stores` stores."""
    started = time.perf_counter()
    connect(url).close()  # kbmcp's schema, distributed by its migration
    with psycopg.connect(source_url, autocommit=True) as src, \
            psycopg.connect(url, autocommit=True) as dst:  # fmt: skip
        _reference_rows(src, dst, stores)
        src.execute(SOURCE_DOCUMENT_STORE, {"stores": stores})
        src.execute(SOURCE_CHUNK_STORE)
        src.execute("ANALYZE document_store; ANALYZE chunk_store")
        recreate = postgres_search._drop_indexes(dst, "chunk_term")
        for table, column, store_table, store_column in STREAMED:
            begun = time.perf_counter()
            if table == "chunk_term":
                low, high = src.execute("SELECT min(id), max(id) FROM chunk").fetchone()
                for first in range(low, high + 1, POSTING_BATCH_CHUNKS):
                    last = first + POSTING_BATCH_CHUNKS - 1
                    rows = _stream(src, dst, table, column, store_table, store_column,
                                   f"t.chunk_id BETWEEN {first} AND {last}")  # fmt: skip
                    print(f"  chunk_term: chunks up to {last}: {rows} bytes", flush=True)
            else:
                _stream(src, dst, table, column, store_table, store_column, "true")
            print(f"{table}: {time.perf_counter() - begun:.0f}s", flush=True)
        _timed("keyword counts", lambda: (dst.execute(COUNT_KEYWORD_TOKENS),
                                          dst.execute(COUNT_KEYWORD_TOTALS)))  # fmt: skip
        _timed("postings' indexes", lambda: [dst.execute(sql) for sql in recreate])
        _timed("HNSW index", lambda: build_index(dst))
        for table in ("tenant", "knowledge_base", "document", "revision", "chunk"):
            dst.execute(postgres_search.SET_IDENTITY.format(table=table))
        _timed("VACUUM ANALYZE", lambda: dst.execute("VACUUM ANALYZE"))
        _check_counts(src, dst)
    print(f"loaded in {time.perf_counter() - started:.0f}s", flush=True)


def _timed(label: str, work: Any) -> None:
    begun = time.perf_counter()
    work()
    print(f"{label}: {time.perf_counter() - begun:.0f}s", flush=True)


def _reference_rows(src: psycopg.Connection[Any], dst: psycopg.Connection[Any],
                    stores: int) -> None:  # fmt: skip
    """The source's tenant and id key (public ids stay valid), its model, and the stores."""
    tenant_id, tenant_public = src.execute("SELECT id, public_id FROM tenant").fetchone()
    key_row = src.execute("SELECT id, key, origin, unkeyed_before, created_at FROM id_key")
    key_row = key_row.fetchone()
    now = src.execute("SELECT created_at FROM tenant").fetchone()[0]
    with dst.transaction():  # DDL on distributed tables: a transaction of its own
        record_model(dst, HashingEmbedder().fingerprint, with_index=False)
    with dst.transaction():
        dst.execute("DELETE FROM id_key")
        dst.execute("INSERT INTO id_key (id, key, origin, unkeyed_before, created_at) "
                    "VALUES (%s, %s, %s, %s, %s)", key_row)  # fmt: skip
        dst.execute("DELETE FROM tenant")
        dst.execute("INSERT INTO tenant (id, public_id, name, created_at) OVERRIDING SYSTEM VALUE"
                    " VALUES (%s, %s, 'local', %s)", (tenant_id, tenant_public, now))  # fmt: skip
        key = id_key_of(dst)
        for n in range(1, stores + 1):
            name = STORE_NAME.format(n=n)
            dst.execute(INSERT_STORE, {"id": n, "tenant_id": tenant_id, "name": name, "now": now,
                                       "public_id": key.make("knowledge_base", tenant_public,
                                                             name)})  # fmt: skip


def _stream(src: psycopg.Connection[Any], dst: psycopg.Connection[Any], table: str, column: str,
            store_table: str, store_column: str, where: str) -> int:  # fmt: skip
    """One table's rows (those `where` selects, `t` being the table) from the source to the
    cluster, binary COPY to binary COPY, the store column replaced by the row's new store.
    Returns the bytes streamed."""
    columns = [r[0] for r in src.execute(SOURCE_COLUMNS, {"table": table}).fetchall()]
    chosen = ", ".join("s.knowledge_base_id" if c == "knowledge_base_id" else f"t.{c}"
                       for c in columns)  # fmt: skip
    joined = f"{table} AS t JOIN {store_table} AS s ON s.{store_column} = t.{column}"
    read = f"COPY (SELECT {chosen} FROM {joined} WHERE {where}) TO STDOUT (FORMAT BINARY)"
    write = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    moved = 0
    with dst.transaction():
        dst.execute(BULK_MODE)
        with src.cursor().copy(read) as reading, dst.cursor().copy(write) as writing:
            for block in reading:
                writing.write(block)
                moved += len(block)
    return moved


def _check_counts(src: psycopg.Connection[Any], dst: psycopg.Connection[Any]) -> None:
    """Every streamed table holds the source's row count, and the recounted keyword rows match
    the postings."""
    for table, *_ in STREAMED:
        want = src.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        got = dst.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        if want != got:
            raise SystemExit(f"{table}: {got} rows on the cluster, {want} in the source")
    postings = dst.execute("SELECT count(*) FROM chunk_term").fetchone()[0]
    counted = dst.execute("SELECT sum(rows) FROM keyword_token").fetchone()[0]
    if postings != counted:
        raise SystemExit(f"keyword_token counts {counted} postings of {postings}")


# ------------------------------------------------------------------ the run


def measure(args: Any, url: str) -> None:
    corpus = bench.corpus_of(args)
    started = time.perf_counter()
    samples = bench.samples_of(bench.corpus_documents(corpus))
    per_doc = corpus.chunks_per_doc
    # Store bench-1 holds the documents n with n mod --stores == 0.
    everywhere = samples["unscoped"]
    first_store = [s for s in everywhere if (s.row // per_doc) % args.stores == 0]
    samples = {"all": everywhere, "one": first_store}
    queries, warmup, embedder = bench.queries_of(args, corpus, samples)
    print(f"queries drawn in {time.perf_counter() - started:.0f}s", flush=True)
    with psycopg.connect(url, autocommit=True) as conn:
        first = conn.execute(STORE_PUBLIC_ID, {"name": STORE_NAME.format(n=1)}).fetchone()[0]
    on_cluster = Workspace(Settings(db=url, embedder="hash"), embedder=embedder)
    owner = on_cluster.local_principal()
    # Searching one store: a token limited to it (its readable set is that store, searched
    # whole), not a knowledge_base_ids filter (a filtered scope of every readable store, read
    # store by store and searched exactly).
    limited = dataclasses.replace(owner, knowledge_base_allowlist=frozenset({first}))
    cells = [(f"all {args.stores} stores", "all", owner), ("one store", "one", limited)]
    try:
        started = time.perf_counter()
        for mode in args.modes.split(","):
            for _, sample, principal in cells:
                for query in warmup[sample]:
                    request = SearchRequest(query, mode=mode)
                    postgres_search.run_search(on_cluster, request, principal)
        print(f"warm-up: {args.warmup} queries per cell in {time.perf_counter() - started:.1f}s")
        print(f"{'mode':<9}{'stores':<14}{'k':>4}{'p50 ms':>9}{'p95 ms':>9}{'recall@k':>10}"
              "  strategies")  # fmt: skip
        for mode in args.modes.split(","):
            for label, sample, principal in cells:
                for limit in (int(k) for k in args.limits.split(",")):
                    cell = postgres_search.run_cell(
                        on_cluster, None, None, queries[sample], mode, SearchFilters(), limit,
                        bench.exact_everything, principal,
                    )  # fmt: skip
                    print(f"{mode:<9}{label:<14}{limit:>4}" + cell.row(), flush=True)
    finally:
        on_cluster.close()


if __name__ == "__main__":
    main()
