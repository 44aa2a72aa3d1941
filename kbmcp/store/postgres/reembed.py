"""The reembed concern (kbmcp/store/reembed.py) on PostgreSQL.

The staged vectors live in a TEMP table of this session (not logged, invisible to others), with
the title each was computed with: a chunk's heading and text never change, so a staged vector
is still right while its document keeps that title. No change log exists here (it feeds a
SQLite server's caches), so the late check compares the staging table with every current chunk
(one join) and the marker stays 0.

Several servers write one database. The switch first takes what a concurrent writer of vectors
holds: the model record FOR UPDATE (ingest holds it FOR SHARE while it writes vectors: its
transaction ends first, and one starting later waits, then sees the new model), and the vector
tables in ACCESS EXCLUSIVE mode (TRUNCATE and the dimension change need it anyway: searches and
writers of vectors wait for the switch, which is set-based and short). Only then is the late
check made, so nothing can commit a chunk between the check and the copy. The HNSW index is
built after the switch commits, once over all the vectors (`finish`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from kbmcp.embed.base import ModelFingerprint
from kbmcp.store.postgres.vectors import Float32Vector, build_index, record_model
from kbmcp.store.reembed import ChunkInput, StagedVector

PgConnection = psycopg.Connection[Any]

# One page of them: the service reads the current chunks a page at a time (memory stays flat).
SELECT_CURRENT_CHUNKS = """
SELECT c.id, d.title, c.heading_path, c.text
FROM document AS d
JOIN chunk AS c
  ON c.knowledge_base_id = d.knowledge_base_id AND c.revision_id = d.current_revision_id
WHERE c.id > %(after)s
ORDER BY c.id
LIMIT %(limit)s
"""
# A current chunk is late when no vector is staged for it, or one computed with another title.
LATE = """
FROM document AS d
JOIN chunk AS c
  ON c.knowledge_base_id = d.knowledge_base_id AND c.revision_id = d.current_revision_id
LEFT JOIN pg_temp.reembed_vector AS s ON s.chunk_id = c.id
WHERE s.chunk_id IS NULL OR s.title IS DISTINCT FROM d.title
"""
SELECT_LATE_CHUNKS = f"SELECT c.id, d.title, c.heading_path, c.text {LATE} ORDER BY c.id"
ANY_LATE_CHUNK = f"SELECT EXISTS (SELECT 1 {LATE})"

CREATE_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS reembed_vector (
    chunk_id  bigint PRIMARY KEY,
    title     text NOT NULL,  -- the document title the vector was computed with
    embedding vector NOT NULL
)
"""
CLEAR_STAGING = "TRUNCATE pg_temp.reembed_vector"
DROP_STAGING = "DROP TABLE IF EXISTS pg_temp.reembed_vector"
STAGE_VECTOR = """
INSERT INTO pg_temp.reembed_vector (chunk_id, title, embedding)
VALUES (%(chunk_id)s, %(title)s, %(embedding)b)
ON CONFLICT (chunk_id) DO UPDATE SET title = excluded.title, embedding = excluded.embedding
"""
# Multi-writer (see the module docstring): the model record, then the vector tables.
LOCK_MODEL = "SELECT 1 FROM embedding_model WHERE id = 1 FOR UPDATE"
LOCK_VECTORS = "LOCK TABLE chunk_vector, chunk_vec IN ACCESS EXCLUSIVE MODE"
COPY_STORED_VECTORS = """
INSERT INTO chunk_vector (chunk_id, knowledge_base_id, embedding)
SELECT s.chunk_id, c.knowledge_base_id, s.embedding
FROM pg_temp.reembed_vector AS s
JOIN chunk AS c ON c.id = s.chunk_id
JOIN document AS d
  ON d.knowledge_base_id = c.knowledge_base_id AND d.current_revision_id = c.revision_id
ORDER BY s.chunk_id
"""
COPY_INDEXED_VECTORS = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
SELECT s.chunk_id, d.knowledge_base_id, s.embedding
FROM pg_temp.reembed_vector AS s
JOIN chunk AS c ON c.id = s.chunk_id
JOIN document AS d
  ON d.knowledge_base_id = c.knowledge_base_id AND d.current_revision_id = c.revision_id
WHERE d.status = 'published'
ORDER BY s.chunk_id
"""
COUNT_CURRENT_CHUNKS = """
SELECT count(*)
FROM document AS d
JOIN chunk AS c
  ON c.knowledge_base_id = d.knowledge_base_id AND c.revision_id = d.current_revision_id
"""


def start(conn: PgConnection) -> tuple[int, int]:
    count = conn.execute(COUNT_CURRENT_CHUNKS).fetchone()[0]
    conn.execute(CREATE_STAGING)
    conn.execute(CLEAR_STAGING)
    return 0, count


def current_chunks(conn: PgConnection, after: int, limit: int) -> list[ChunkInput]:
    rows = conn.execute(SELECT_CURRENT_CHUNKS, {"after": after, "limit": limit})
    return [ChunkInput(*row) for row in rows]


def stage_vectors(conn: PgConnection, rows: Sequence[StagedVector]) -> None:
    if not rows:
        return
    with conn.transaction(), conn.cursor() as cur:  # one commit per batch, not per row
        cur.executemany(
            STAGE_VECTOR,
            [
                {"chunk_id": row.chunk_id, "title": row.title,
                 "embedding": Float32Vector(row.embedding)}
                for row in rows
            ],
        )  # fmt: skip


def late_chunks(conn: PgConnection, marker: int) -> tuple[int, list[ChunkInput]]:
    return marker, [ChunkInput(*row) for row in conn.execute(SELECT_LATE_CHUNKS)]


def switch(conn: PgConnection, fingerprint: ModelFingerprint, marker: int) -> int | None:
    conn.execute(LOCK_MODEL)
    conn.execute(LOCK_VECTORS)
    if conn.execute(ANY_LATE_CHUNK).fetchone()[0]:
        return None  # committed before the locks were taken: embed them, then try again
    record_model(conn, fingerprint, with_index=False)
    conn.execute(COPY_STORED_VECTORS)
    conn.execute(COPY_INDEXED_VECTORS)
    return int(conn.execute(COUNT_CURRENT_CHUNKS).fetchone()[0])


def finish(conn: PgConnection) -> None:
    """(Inside a write transaction of its own: CREATE INDEX holds off writers of chunk_vec while
    it runs, not searches, which scan exactly meanwhile.)"""
    build_index(conn)


def drop_staging(conn: PgConnection) -> None:
    if conn.closed or conn.broken:
        return  # a session's temporary tables end with it
    conn.execute(DROP_STAGING)
