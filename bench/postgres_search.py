"""The PostgreSQL side of bench/search.py: the bench's corpus in a PostgreSQL database, and the
side-by-side run.

Both backends are searched through the service (`kbmcp.service.search.search`) of a Workspace
on each: the SQLite file's server workspace (accelerators on, as `kbmcp serve` runs) and a
PostgreSQL workspace on the URL, with the same precomputed query vectors.

The corpus: copied from the bench's SQLite file with `kbmcp copy` (the same ids, so both
backends' results compare row for row), or, for a PostgreSQL-only run, written straight into
the database by `build_postgres` (the rows bench/search.py's `build` writes, in bulk: COPY, the
keyword postings and the HNSW index built once the rows are in).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np
import psycopg
from psycopg.types import TypeInfo

from kbmcp.access import Principal
from kbmcp.clock import now_iso
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.models import SearchFilters, SearchRequest, SearchResponse, SearchResult
from kbmcp.service.ingest_batch import sha256
from kbmcp.service.search import search
from kbmcp.store.catalog import dump_json
from kbmcp.store.copy import copy_store
from kbmcp.store.postgres import halves, keyword, plan_choice, shards, vector_channel
from kbmcp.store.postgres.connection import configure, connect
from kbmcp.store.postgres.id_key import id_key_of
from kbmcp.store.postgres.vectors import DROP_HNSW, Float32Vector, build_index, record_model
from kbmcp.workspace import Workspace

COUNT_BENCH_DOCUMENTS = """
SELECT count(*) FROM document AS d JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.name = 'bench' AND kb.kind = 'documents'
"""


def run_search(
    ws: Workspace, request: SearchRequest, principal: Principal | None = None
) -> SearchResponse:
    """`request` through the service, as `principal` (default: the local tenant, the bench's
    one tenant)."""
    return search(ws, principal or ws.local_principal(), request)


def strategies(response: SearchResponse) -> str:
    return f"{response.stats.lexical_strategy}/{response.stats.vector_strategy}"


@contextlib.contextmanager
def exact_postgres() -> Iterator[None]:
    """Brute force on PostgreSQL: every term scored (no stop-word pruning, every posting), the
    vector channel an exact scan of the whole scope (never the HNSW index)."""
    saved = channel.STOPWORD_MIN_ROWS, plan_choice.VECTOR_EXACT_MAX_ROWS
    channel.STOPWORD_MIN_ROWS = 10**12
    plan_choice.VECTOR_EXACT_MAX_ROWS = 10**12
    try:
        yield
    finally:
        channel.STOPWORD_MIN_ROWS, plan_choice.VECTOR_EXACT_MAX_ROWS = saved


def bench_documents(conn: psycopg.Connection[Any]) -> int:
    return int(conn.execute(COUNT_BENCH_DOCUMENTS).fetchone()[0])


# ------------------------------------------------------------------ a corpus written directly

INSERT_TENANT = """
INSERT INTO tenant (public_id, name, created_at) VALUES (%(public_id)s, 'local', %(now)s)
RETURNING id
"""
INSERT_STORE = """
INSERT INTO knowledge_base (public_id, tenant_id, name, kind, created_at, updated_at)
VALUES (%(public_id)s, %(tenant_id)s, 'bench', 'documents', %(now)s, %(now)s)
RETURNING id
"""
NEXT_IDS = """
SELECT (SELECT coalesce(max(id), 0) FROM document), (SELECT coalesce(max(id), 0) FROM chunk)
"""
COPY_DOCUMENTS = """
COPY document (id, public_id, knowledge_base_id, path, title, kind, metadata, status,
               current_revision_id, created_at, updated_at) FROM STDIN"""
COPY_TAGS = "COPY document_tag (document_id, key, value, knowledge_base_id) FROM STDIN"
COPY_REVISIONS = """
COPY revision (id, public_id, document_id, number, content, content_hash, char_count,
               line_count, created_at, knowledge_base_id) FROM STDIN"""
COPY_CHUNKS = """
COPY chunk (id, public_id, revision_id, ordinal, heading_path, char_start, char_end, line_start,
            line_end, text, knowledge_base_id) FROM STDIN"""
COPY_STORED_VECTORS = """
COPY chunk_vector (chunk_id, knowledge_base_id, embedding) FROM STDIN (FORMAT BINARY)"""
COPY_INDEXED_VECTORS = """
COPY chunk_vec (chunk_id, knowledge_base_id, embedding) FROM STDIN (FORMAT BINARY)"""
SET_IDENTITY = """
SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 0) + 1, false)
FROM {table}"""
BATCH_DOCUMENTS = 500
# Processes writing batches: a bulk build's time is Python's (FTS5 tokens, COPY text), and the
# database serialises only the keyword totals' upserts at each batch's end.
BUILD_PROCESSES = 4
# chunk_vector (every current chunk's vector, kept for reuse when a document is edited) is never
# read by a search: a PostgreSQL-only bench database leaves it empty (1.5 GB at 1M chunks).
STORED_VECTORS = False
# A table's indexes and primary key, as statements that re-create them.
SELECT_INDEXES = """
SELECT i.indexrelid::regclass::text, c.conname, pg_get_indexdef(i.indexrelid),
       pg_get_constraintdef(c.oid)
FROM pg_index AS i
LEFT JOIN pg_constraint AS c ON c.conindid = i.indexrelid AND c.contype = 'p'
WHERE i.indrelid = %(table)s::regclass
"""


# The first chunk's vector (a bench database's first chunk is the corpus's), as floats.
FIRST_VECTOR = "SELECT embedding::real[] FROM chunk_vec ORDER BY chunk_id LIMIT 1"


def check_postgres_built_alike(
    pg: Any, corpus: Any, bench: ModuleType, vectors: bool = True
) -> None:
    """bench/search.py's `check_built_alike` for a reused database (`vectors`: its vectors
    too)."""
    bench.check_built_alike(pg, "%s", corpus, "the PostgreSQL database",
                            FIRST_VECTOR if vectors else None)  # fmt: skip


# The bench store's chunks, in the corpus's order (its rows were written with consecutive ids).
BENCH_CHUNKS = """
SELECT min(c.id), count(*), (SELECT id FROM knowledge_base WHERE name = 'bench')
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.name = 'bench' AND kb.kind = 'documents'
"""
REVECTOR_ROWS = 50_000  # vectors drawn and copied at a time


def revector_postgres(conn: psycopg.Connection[Any], corpus: Any) -> dict[str, float]:
    """Replace every vector of a bench database with the ones `corpus` draws (its --vectors),
    then rebuild the HNSW index: the text and keyword rows (most of a 1M build) are kept.
    Returns the seconds of each phase."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if corpus.shaped is None:
        raise SystemExit(
            "--revector: with --vectors shaped (the hashing vectors come with a build)"
        )
    first, count, kb_id = conn.execute(BENCH_CHUNKS).fetchone()
    if count != corpus.docs * corpus.chunks_per_doc:
        raise SystemExit(f"the database holds {count} bench chunks, not the corpus's")
    vector_oid = _vector_oid(conn)
    with conn.transaction():
        conn.execute(DROP_HNSW)
        conn.execute("TRUNCATE chunk_vec")
        with conn.cursor() as cur, cur.copy(COPY_INDEXED_VECTORS) as copy:
            copy.set_types(["bigint", "bigint", vector_oid])
            for start in range(0, count, REVECTOR_ROWS):
                rows = min(REVECTOR_ROWS, count - start)
                vectors = corpus.embed_many([np.zeros(1, np.int64)] * rows, start)
                for offset, vector in enumerate(vectors):
                    copy.write_row((first + start + offset, kb_id, Float32Vector(vector.tobytes())))
                print(f"  {start + rows} vectors written", flush=True)
    timings["vectors"] = time.perf_counter() - started
    started = time.perf_counter()
    build_index(conn)
    timings["hnsw"] = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute("VACUUM ANALYZE chunk_vec")
    timings["vacuum"] = time.perf_counter() - started
    return timings


def build_postgres(
    conn: psycopg.Connection[Any],
    corpus: Any,
    documents: Iterable[Any],
    documents_again: Callable[[], Iterable[Any]],
) -> dict:
    """Write the corpus into an empty database: `documents` are bench/search.py's
    CorpusDocument, in its order; `documents_again` draws them once more. Returns the seconds of
    each phase.

    Two passes, so the HNSW index is built while Python does the keyword index's work: the
    documents, revisions, chunks and vectors first (cheap), then the HNSW build on another
    connection (in the server's processes) while the keyword rows are written (FTS5 tokens in
    Python: most of a build), then the postings' indexes."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    now = now_iso()
    key = id_key_of(conn)
    with conn.transaction():
        record_model(conn, HashingEmbedder().fingerprint, with_index=False)
        tenant_public = key.make("tenant", "local")
        tenant_id = conn.execute(INSERT_TENANT, {"public_id": tenant_public, "now": now})
        tenant_id = tenant_id.fetchone()[0]
        kb_public = key.make("knowledge_base", tenant_public, "bench")
        kb_id = conn.execute(
            INSERT_STORE, {"public_id": kb_public, "tenant_id": tenant_id, "now": now}
        ).fetchone()[0]
    document_id, chunk_id = conn.execute(NEXT_IDS).fetchone()
    # The postings' indexes are built once the rows are in: sorted builds are several times
    # faster than 70 index entries per chunk inserted one by one, and half the size.
    indexes = _drop_indexes(conn, "chunk_term")
    # Batches are written by BUILD_PROCESSES processes (forked: they share the corpus), each
    # with its own connection and ids given here; the documents are drawn here, in order.
    global _build
    _build = _BuildState(corpus, key, kb_id, kb_public, now, conn.info.dsn, "rows")
    _run_batches(documents, document_id, chunk_id, started)
    for table in ("tenant", "knowledge_base", "document", "revision", "chunk"):
        conn.execute(SET_IDENTITY.format(table=table))
    timings["rows"] = time.perf_counter() - started
    hnsw: dict[str, float] = {}

    def build_hnsw() -> None:
        begun = time.perf_counter()
        with psycopg.connect(conn.info.dsn, autocommit=True) as other:
            build_index(other)
        hnsw["hnsw"] = time.perf_counter() - begun
        print(f"  HNSW index built in {hnsw['hnsw']:.0f}s", flush=True)

    indexing = threading.Thread(target=build_hnsw)
    indexing.start()
    started = time.perf_counter()
    _build = replace(_build, phase="keywords")
    _run_batches(documents_again(), document_id, chunk_id, started)
    timings["keyword rows"] = time.perf_counter() - started
    started = time.perf_counter()
    for statement in indexes:
        conn.execute(statement)
    timings["keyword indexes"] = time.perf_counter() - started
    indexing.join()
    if "hnsw" not in hnsw:
        raise SystemExit("the HNSW build failed (see above)")
    timings["hnsw (during the keyword rows)"] = hnsw["hnsw"]
    started = time.perf_counter()
    conn.execute("VACUUM ANALYZE")
    timings["vacuum"] = time.perf_counter() - started
    return timings


def _run_batches(documents: Iterable[Any], document_id: int, chunk_id: int, started: float) -> None:
    """The current phase's batches through BUILD_PROCESSES forked processes."""
    written = 0
    with multiprocessing.get_context("fork").Pool(BUILD_PROCESSES) as pool:
        pending: deque[Any] = deque()  # at most two batches per process drawn ahead
        for batch in _batches(documents, document_id, chunk_id):
            pending.append(pool.apply_async(_write_batch_in_worker, (batch,)))
            while pending and (len(pending) > 2 * BUILD_PROCESSES or pending[0].ready()):
                written += pending.popleft().get()
                if written % (BATCH_DOCUMENTS * 20) == 0:
                    rate = written / (time.perf_counter() - started)
                    print(f"  {written} documents written ({rate:.0f}/s)", flush=True)
        for result in pending:
            written += result.get()


@dataclass
class _BuildState:
    """What every writing process needs (inherited through fork)."""

    corpus: Any
    key: Any
    kb_id: int
    kb_public: str
    now: str
    dsn: str
    phase: str  # "rows" (documents, revisions, chunks, vectors) or "keywords"
    conn: psycopg.Connection[Any] | None = None


_build: _BuildState | None = None


def _batches(
    documents: Iterable[Any], document_id: int, chunk_id: int
) -> Iterator[tuple[list[Any], int, int]]:
    """(documents, id before the first document, id before the first chunk) per batch."""
    batch: list[Any] = []
    for item in documents:
        batch.append(item)
        if len(batch) == BATCH_DOCUMENTS:
            yield batch, document_id, chunk_id
            document_id += len(batch)
            chunk_id += sum(len(d.chunk_words) for d in batch)
            batch = []
    if batch:
        yield batch, document_id, chunk_id


def _write_batch_in_worker(args: tuple[list[Any], int, int]) -> int:
    batch, document_id, chunk_id = args
    state = _build
    assert state is not None
    if state.conn is None:
        state.conn = psycopg.connect(state.dsn, autocommit=True)
        configure(state.conn)
    if state.phase == "keywords":
        _write_keywords(state.conn, state.corpus, state.kb_id, batch, chunk_id)
    else:
        _write_batch(state.conn, state.corpus, state.key, state.kb_id, state.kb_public, batch,
                     document_id, chunk_id, state.now)  # fmt: skip
    return len(batch)


def _write_keywords(
    conn: psycopg.Connection[Any], corpus: Any, kb_id: int, batch: Sequence[Any], chunk_id: int
) -> None:
    """The keyword index's rows of a batch written by `_write_batch` (same chunk ids)."""
    rows = []
    for document in batch:
        title = corpus.title(document.doc)
        for ids in document.chunk_words:
            chunk_id += 1
            rows.append(keyword.KeywordRow(kb_id, chunk_id, title, (), corpus.text(ids)))
    with conn.transaction():
        keyword.index_chunks(conn, rows)


def _write_batch(
    conn: psycopg.Connection[Any],
    corpus: Any,
    key: Any,
    kb_id: int,
    kb_public: str,
    batch: Sequence[Any],
    document_id: int,
    chunk_id: int,
    now: str,
) -> int:
    vectors: list[tuple[int, Float32Vector]] = []
    vector_oid = _vector_oid(conn)  # not inside a COPY: the connection is busy until it ends
    with conn.transaction(), conn.cursor() as cur:
        docs, tags, revisions, chunks = [], [], [], []
        for n, document in enumerate(batch):
            doc, path, bucket = document.doc, document.path, document.bucket
            chunk_words = document.chunk_words
            doc_id = document_id + n + 1
            doc_public = key.make("document", kb_public, path)
            rev_public = key.make("revision", doc_public, 1)
            texts = [corpus.text(ids) for ids in chunk_words]
            content = "\n\n".join(texts)
            title = corpus.title(doc)
            metadata = dump_json({"bucket": bucket} if bucket else {})
            docs.append((doc_id, doc_public, kb_id, path, title, "text", metadata, "published",
                         doc_id, now, now))  # fmt: skip
            if bucket:
                tags.append((doc_id, "bucket", bucket, kb_id))
            revisions.append((doc_id, rev_public, doc_id, 1, content, sha256(content),
                              len(content), 2 * len(texts) - 1, now, kb_id))  # fmt: skip
            embedded = corpus.embed_many(chunk_words, doc * corpus.chunks_per_doc)
            offset = 0
            for ordinal, text in enumerate(texts):
                chunk_id += 1
                chunks.append((chunk_id, key.make("chunk", rev_public, ordinal), doc_id, ordinal,
                               "[]", offset, offset + len(text), 2 * ordinal + 1,
                               2 * ordinal + 1, text, kb_id))  # fmt: skip
                offset += len(text) + 2
                vectors.append((chunk_id, Float32Vector(embedded[ordinal].tobytes())))
        for sql, rows in ((COPY_DOCUMENTS, docs), (COPY_TAGS, tags), (COPY_REVISIONS, revisions),
                          (COPY_CHUNKS, chunks)):  # fmt: skip
            with cur.copy(sql) as copy:
                for row in rows:
                    copy.write_row(row)
        if STORED_VECTORS:
            with cur.copy(COPY_STORED_VECTORS) as copy:
                copy.set_types(["bigint", "bigint", vector_oid])
                for chunk, vector in vectors:
                    copy.write_row((chunk, kb_id, vector))
        with cur.copy(COPY_INDEXED_VECTORS) as copy:
            copy.set_types(["bigint", "bigint", vector_oid])
            for chunk, vector in vectors:
                copy.write_row((chunk, kb_id, vector))
    return chunk_id


# ------------------------------------------------------------------ the run


def apply_plan_settings(args: argparse.Namespace) -> None:
    """The plan settings bench/search.py's options move for one run (module attributes)."""
    for value, module, name in ((args.ef_search, vector_channel, "HNSW_EF_SEARCH"),
                                (args.exact_max_rows, plan_choice, "VECTOR_EXACT_MAX_ROWS"),
                                (args.halves_min_rows, halves, "HALVES_MIN_ROWS"),
                                (args.store_lanes, shards, "STORE_LANES"),
                                (args.bounded_list_size, plan_choice, "BOUNDED_LIST_SIZE"),
                                (args.bounded_rescored, plan_choice,
                                 "BOUNDED_RESCORED_PER_DEPTH")):  # fmt: skip
        if value is not None:
            setattr(module, name, value)


def main(args: argparse.Namespace, bench: ModuleType) -> None:
    """bench/search.py with a PostgreSQL --db (`bench`: that module, for its corpus and cells)."""
    if args.memories or args.documents_only:
        raise SystemExit("--memories and --documents-only: SQLite only for now")
    if args.clock != "wall":
        raise SystemExit("--clock cpu: the database's work is in another process; use wall")
    if not args.postgres_only and args.file is None:
        raise SystemExit("a PostgreSQL --db needs --file (the SQLite side) or --postgres-only")
    apply_plan_settings(args)
    corpus = bench.corpus_of(args)
    pg = connect(args.db)
    held = bench_documents(pg)
    ws = reference = None
    started = time.perf_counter()
    if args.postgres_only:
        if held == 0:
            written: list[Any] = []

            def documents() -> Iterator[Any]:
                for document in bench.corpus_documents(corpus):
                    yield document
                    written.append(replace(document, chunk_words=[]))

            def again() -> Iterator[Any]:
                return bench.corpus_documents(bench.corpus_of(args))

            timings = build_postgres(pg, corpus, documents(), again)
            print("built: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()), flush=True)
            samples = bench.samples_of(written)
        elif held != corpus.docs:
            raise SystemExit(f"the database holds {held} bench documents, not {corpus.docs}")
        else:
            check_postgres_built_alike(pg, corpus, bench, vectors=not args.revector)
            if args.revector:
                timings = revector_postgres(pg, corpus)
                print("vectors replaced: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()),
                      flush=True)  # fmt: skip
            samples = bench.samples_of(bench.corpus_documents(corpus))
    else:
        reuse = args.file.exists()
        ws = Workspace(Settings(db=args.file, embedder="hash"), embedder=HashingEmbedder(),
                       long_lived=True)  # fmt: skip
        samples = bench.build(ws, corpus, write=not reuse)
        if held != corpus.docs:
            report = copy_store(str(args.file), args.db, force=True)
            print(f"copied into PostgreSQL in {report.seconds:.0f}s", flush=True)
        else:
            check_postgres_built_alike(pg, corpus, bench)
    pg.close()
    print(f"corpus ready in {time.perf_counter() - started:.0f}s", flush=True)
    if args.build_only:
        return
    queries, warmup, embedder = bench.queries_of(args, corpus, samples)
    on_postgres = Workspace(Settings(db=args.db, embedder="hash"), embedder=embedder)
    if ws is not None:
        ws._embedder = embedder
        reference = Workspace(ws.settings, embedder=embedder)  # one-shot: SQL only
    cells = bench.make_cells(args.filters, {})
    started = time.perf_counter()
    for mode in args.modes.split(","):
        for _, sample, filters in cells:
            for query in warmup[sample]:
                request = SearchRequest(query, mode=mode, filters=filters)
                run_search(on_postgres, request)
                if ws is not None:
                    run_search(ws, request)
    print(f"warm-up: {args.warmup} queries per cell in {time.perf_counter() - started:.1f}s")
    limits = [int(k) for k in args.limits.split(",")]
    if ws is None:
        print(f"{'mode':<9}{'scope':<12}{'k':>4}{'p50 ms':>9}{'p95 ms':>9}{'recall@k':>10}"
              "  strategies")  # fmt: skip
    else:
        print(f"{'':<25}{'SQLite server':^27}{'PostgreSQL':^27}")
        print(f"{'mode':<9}{'scope':<12}{'k':>4}" + f"{'p50 ms':>9}{'p95 ms':>9}{'recall':>9}" * 2
              + f"{'p50 x':>8}{'same':>7}  strategies")  # fmt: skip
    for mode in args.modes.split(","):
        for label, sample, filters in cells:
            for limit in limits:
                cell = run_cell(on_postgres, ws, reference, queries[sample], mode, filters, limit,
                                bench.exact_everything)  # fmt: skip
                print(f"{mode:<9}{label:<12}{limit:>4}" + cell.row(), flush=True)
    on_postgres.close()
    if ws is not None and reference is not None:
        reference.close()
        ws.close()


@dataclass
class Cell:
    postgres_ms: list[float]
    postgres_recall: list[float]
    strategies: Counter[str]
    sqlite_ms: list[float]
    sqlite_recall: list[float]
    same: int = 0

    def row(self) -> str:
        pg = _columns(self.postgres_ms, self.postgres_recall)
        used = ", ".join(f"{k} {v}" for k, v in self.strategies.most_common())
        if not self.sqlite_ms:
            return pg + f"  {used}"
        ratio = statistics.median(self.postgres_ms) / statistics.median(self.sqlite_ms)
        queries = len(self.postgres_ms)
        return (_columns(self.sqlite_ms, self.sqlite_recall) + pg
                + f"{ratio:>8.2f}{self.same:>4}/{queries:<2}  {used}")  # fmt: skip


def _columns(timings: list[float], recalls: list[float]) -> str:
    recall = statistics.mean(recalls) if recalls else float("nan")
    p50, p95 = np.percentile(timings, 50), np.percentile(timings, 95)
    return f"{p50:>9.1f}{p95:>9.1f}{recall:>9.3f}"


def run_cell(
    on_postgres: Workspace,
    ws: Workspace | None,
    reference: Workspace | None,
    queries: Sequence[str],
    mode: str,
    filters: SearchFilters,
    limit: int,
    exact_sqlite: Callable[[], contextlib.AbstractContextManager[None]],
    principal: Principal | None = None,
) -> Cell:
    """Each query on both backends, in alternating order (load hits both alike); recall@k of
    each against the exact search (SQLite's one-shot brute force when there is a file, else
    PostgreSQL's exact plan). `principal`: who searches PostgreSQL (default: the local
    tenant)."""
    cell = Cell([], [], Counter(), [], [])
    for n, query in enumerate(queries):
        request = SearchRequest(query, mode=mode, limit=limit, filters=filters)
        runs = ["postgres", "sqlite"] if ws is not None else ["postgres"]
        if n % 2:
            runs.reverse()
        got: dict[str, list[SearchResult]] = {}
        for backend in runs:
            started = time.perf_counter()
            if backend == "postgres":
                response = run_search(on_postgres, request, principal)
            else:
                response = run_search(ws, request)
            elapsed = (time.perf_counter() - started) * 1000
            got[backend] = response.results
            if backend == "postgres":
                cell.strategies[strategies(response)] += 1
            (cell.postgres_ms if backend == "postgres" else cell.sqlite_ms).append(elapsed)
        if reference is not None:
            with exact_sqlite():
                truth = run_search(reference, request).results
        else:
            with exact_postgres():
                truth = run_search(on_postgres, request, principal).results
        want = {r.chunk_id for r in truth}
        if want:
            for backend, results in got.items():
                recall = len(want & {r.chunk_id for r in results}) / len(want)
                (cell.postgres_recall if backend == "postgres" else cell.sqlite_recall).append(
                    recall
                )
        if "sqlite" in got:
            cell.same += _scored(got["sqlite"]) == _scored(got["postgres"])
    return cell


def _scored(results: list[SearchResult]) -> list[tuple[str, float]]:
    return [(r.chunk_id, round(r.score, 6)) for r in results]


def _drop_indexes(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """Drop a table's indexes (its primary key too); returns the statements that re-create
    them."""
    recreate = []
    for index, constraint, index_sql, constraint_sql in conn.execute(
        SELECT_INDEXES, {"table": table}
    ).fetchall():
        if constraint:
            conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")
            recreate.append(f"ALTER TABLE {table} ADD CONSTRAINT {constraint} {constraint_sql}")
        else:
            conn.execute(f"DROP INDEX {index}")
            recreate.append(index_sql)
    return recreate


def _vector_oid(conn: psycopg.Connection[Any]) -> int:
    info = TypeInfo.fetch(conn, "vector")
    assert info is not None
    return int(info.oid)
