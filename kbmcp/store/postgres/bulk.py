"""Loading a whole database at once (`kbmcp copy`, kbmcp/store/copy.py): the statements that make
a load of millions of rows minutes instead of half an hour.

- Rows go in with COPY, vectors in pgvector's binary form (vectors.py: exact, no text floats).
- The postings (chunk_term: about 70 rows per chunk) lose their indexes and foreign key for the
  load and get them back at the end: each index is built once from sorted rows instead of grown
  by millions of random inserts, and the foreign key is checked by one join instead of one
  trigger call per row. The definitions are read from the catalog first, so they come back
  exactly as the migrations made them; DDL is transactional, so a copy that fails leaves them
  as they were.
- The keyword rows are made from the copied chunks read through a server-side cursor (memory
  stays flat at any size), a batch per COPY; the indexed vectors are copied inside the server
  (chunk_vector to chunk_vec: they never cross the network again).
- The transaction gets memory for its sorts and index builds (set_config(..., true): this
  transaction only; the HNSW build is several times slower when its graph does not fit).
- Index builds report their progress (pg_stat_progress_create_index, read from a second
  connection): the HNSW build and the postings' keys take minutes at 100k chunks.
- ANALYZE once the rows are in (reading them back for the keyword rows without statistics
  made each FETCH of the cursor seconds long) and again at the end, so the first searches on
  the copy are planned with its statistics.
- VACUUM once the copy is committed (it cannot run inside a transaction): it marks the pages
  all-visible, without which an index-only scan still reads the row's heap page to check
  visibility. Autovacuum gets there eventually, and not always all the way: on a 100k-chunk
  copy it had left 12% of chunk_term's pages unmarked minutes later, and a 10%-scope search
  read ~12,000 heap pages for the postings it found (1 heap fetch per posting) instead of ~120
  index pages.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg
from psycopg.types import TypeInfo

from kbmcp.store.postgres import citus, keyword
from kbmcp.store.postgres.vectors import Float32Vector

PgConnection = psycopg.Connection[Any]

# The tables whose indexes and constraints wait for the end of the load (measured: the
# postings' two indexes and foreign key are most of a 100k-chunk load's server time; the other
# tables hold one row per chunk or fewer, and their keys cost little).
DEFERRED = ("chunk_term",)
# Memory for this transaction only, never less than the server's own setting (a server set up
# for 1M chunks has GBs of maintenance_work_mem: docs/scale-out.md).
AT_LEAST = {
    "maintenance_work_mem": "512MB",  # index builds: a 100k x 384 HNSW graph fits
    "work_mem": "64MB",  # the keyword triggers' per-statement counts
}
RAISE_SETTING = """
SELECT set_config(%(name)s, (greatest(pg_size_bytes(current_setting(%(name)s)),
                                      pg_size_bytes(%(least)s)) / 1024)::bigint || 'kB', true)
"""
# Indexes that belong to no constraint (those come back with their constraint).
SELECT_INDEXES = """
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
FROM pg_index AS i
WHERE i.indrelid = ANY(%(tables)s::regclass[])
  AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c
                  WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u', 'x'))
ORDER BY 1
"""
# Keys of the tables, and foreign keys from or to them; keys first when re-created (a foreign
# key needs the key it references).
SELECT_CONSTRAINTS = """
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), contype = 'f'
FROM pg_constraint
WHERE contype IN ('p', 'u', 'f')
  AND (conrelid = ANY(%(tables)s::regclass[]) OR confrelid = ANY(%(tables)s::regclass[]))
ORDER BY contype = 'f', 1, 2
"""
VECTOR_TYPE = "vector"
# The keyword index's input: every indexed chunk with a vector (the rows ingest indexes).
SELECT_KEYWORD_SOURCE = """
SELECT i.knowledge_base_id, d.title, c.id, c.heading_path, c.text
FROM indexed_chunk AS i
JOIN chunk AS c ON c.knowledge_base_id = i.knowledge_base_id AND c.id = i.chunk_id
JOIN document AS d ON d.knowledge_base_id = i.knowledge_base_id AND d.id = i.document_id
WHERE EXISTS (SELECT 1 FROM chunk_vector AS v
              WHERE v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id)
ORDER BY c.id
"""
INDEX_EVERY_VECTOR = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
SELECT i.chunk_id, i.knowledge_base_id, v.embedding
FROM indexed_chunk AS i
JOIN chunk_vector AS v ON v.knowledge_base_id = i.knowledge_base_id AND v.chunk_id = i.chunk_id
ORDER BY i.chunk_id
"""
ANALYZE = "ANALYZE"
VACUUM = "VACUUM {tables}"
KEYWORD_BATCH = 5000  # chunks per COPY of postings (about 350,000 rows)


def begin(conn: PgConnection) -> None:
    """First in the load's transaction. On Citus the load's DDL (emptying the tables, the
    postings' keys and indexes) comes after reads of reference tables that distributed tables
    have foreign keys to, which Citus allows over one connection per node only: the whole
    transaction uses one."""
    if citus.is_citus(conn):
        conn.execute(citus.SEQUENTIAL)


def prepare(conn: PgConnection) -> None:
    for name, least in AT_LEAST.items():
        conn.execute(RAISE_SETTING, {"name": name, "least": least})


@contextlib.contextmanager
def deferred_indexes(
    conn: PgConnection, say: Callable[[str], None], tables: Sequence[str] = DEFERRED
) -> Iterator[None]:
    """Drop the tables' indexes and constraints; re-create them when the block ends normally."""
    params = {"tables": list(tables)}
    indexes = conn.execute(SELECT_INDEXES, params).fetchall()
    constraints = conn.execute(SELECT_CONSTRAINTS, params).fetchall()
    for table, name, _definition, _foreign in reversed(constraints):
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_quoted(name)}")
    for index, _definition in indexes:
        conn.execute(f"DROP INDEX {index}")
    yield
    say(f"building the indexes of {', '.join(tables)}")
    for table, name, definition, foreign in constraints:
        if not foreign:
            conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {_quoted(name)} {definition}")
    for _index, definition in indexes:
        conn.execute(definition)
    for table, name, definition, foreign in constraints:
        if foreign:
            conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {_quoted(name)} {definition}")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def copy_rows(
    conn: PgConnection, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """COPY rows into a table; `chunk_vector`'s vectors in binary (the bytes SQLite stores)."""
    if table == "chunk_vector":
        info = TypeInfo.fetch(conn, VECTOR_TYPE)
        assert info is not None  # the extension exists once the schema is migrated
        sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
        vector_at = list(columns).index("embedding")
        with conn.cursor() as cur, cur.copy(sql) as copy:
            copy.set_types([info.oid if i == vector_at else "int8" for i in range(len(columns))])
            for row in rows:
                values = list(row)
                values[vector_at] = Float32Vector(bytes(values[vector_at]))
                copy.write_row(values)
        return
    sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    with conn.cursor() as cur, cur.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def read_rows(conn: PgConnection, sql: str, name: str) -> Iterator[Sequence[Any]]:
    """A query's rows through a server-side cursor (inside the caller's transaction), in binary:
    vectors come back as the bytes SQLite stores (vectors.Float32Vector)."""
    with conn.cursor(name=name, binary=True) as cur:
        cur.itersize = 5000
        cur.execute(sql)
        yield from cur


def index_keywords(conn: PgConnection, done: Callable[[int], None]) -> int:
    """The keyword rows of every indexed chunk, a batch per COPY (`done` gets each batch's
    size); the chunks indexed. A batch's rows are made here while the previous batch is written
    by another thread: the server's work and Python's overlap. The connection does one thing at
    a time: the next batch is fetched only once the previous COPY is over."""
    import json

    made = keyword.KeywordBatches(conn)
    indexed = 0
    with (
        conn.cursor(name="kbmcp_copy_keywords") as cur,
        ThreadPoolExecutor(max_workers=1) as writer,
    ):
        cur.execute(SELECT_KEYWORD_SOURCE)
        batch = cur.fetchmany(KEYWORD_BATCH)
        writing: tuple[Future[None], int] | None = None  # a batch being written, its chunks
        while batch:
            rows = [keyword.KeywordRow(store, chunk_id, title, json.loads(heading), text)
                    for store, title, chunk_id, heading, text in batch]  # fmt: skip
            lines = made.lines(rows)
            if writing is not None:
                writing[0].result()
                done(writing[1])
            batch = cur.fetchmany(KEYWORD_BATCH)
            writing = writer.submit(keyword.write_lines, conn, *lines), len(rows)
            indexed += len(rows)
        if writing is not None:
            writing[0].result()
            done(writing[1])
    return indexed


def index_vectors(conn: PgConnection) -> int:
    """chunk_vec's rows: the vectors of the indexed chunks, copied inside the server."""
    return conn.execute(INDEX_EVERY_VECTOR).rowcount


def analyze(conn: PgConnection) -> None:
    conn.execute(ANALYZE)


def vacuum(conn: PgConnection, tables: Sequence[str]) -> None:
    """VACUUM `tables`: on a connection in autocommit mode, outside any transaction."""
    conn.execute(VACUUM.format(tables=", ".join(tables)))


# An index build's progress in the server: its phase and how far it is in it (blocks of the table
# read, or tuples sorted and loaded).
SELECT_BUILD_PROGRESS = """
SELECT relid::regclass::text, phase, blocks_done, blocks_total, tuples_done, tuples_total
FROM pg_stat_progress_create_index
WHERE pid = %(pid)s
"""
PROGRESS_EVERY = 10.0  # seconds between progress lines


@contextlib.contextmanager
def build_progress(conn: PgConnection, url: str, say: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, a line every PROGRESS_EVERY seconds on the index `conn` is building:
    its phase, how far it is and the time left at the phase's rate so far. A second connection
    reads it (the first is busy building); without one, the block just runs."""
    from kbmcp.store.postgres.connection import connect

    try:
        watcher = connect(url, migrate=False)
    except Exception:  # a server at its connection limit: the copy goes on without it
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_watch, args=(watcher, conn.info.backend_pid, say, stop), daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        watcher.close()


def _watch(
    watcher: PgConnection, pid: int, say: Callable[[str], None], stop: threading.Event
) -> None:
    first: dict[tuple[str, str], tuple[float, float]] = {}  # (table, phase) -> (when, fraction)
    while not stop.wait(PROGRESS_EVERY):
        try:
            row = watcher.execute(SELECT_BUILD_PROGRESS, {"pid": pid}).fetchone()
        except Exception:  # progress is a courtesy: never fail the copy over it
            return
        if row is None:
            continue
        table, phase, blocks_done, blocks_total, tuples_done, tuples_total = row
        done, total = (tuples_done, tuples_total) if tuples_total else (blocks_done, blocks_total)
        line = f"building an index of {table} ({phase})"
        if total and 0 < done < total:
            now, fraction = time.perf_counter(), done / total
            since, then = first.setdefault((table, phase), (now, fraction))
            line += f": {100 * done // total}%"
            if fraction > then:  # the rate since this phase was first seen
                left = (1 - fraction) * (now - since) / (fraction - then)
                line += f", about {left:.0f} s left in this phase"
        say(line)
