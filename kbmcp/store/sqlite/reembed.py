"""The reembed concern (kbmcp/store/reembed.py) on SQLite.

The staged vectors live in a TEMP table: it is in this connection's temporary database, not
the file, so filling it takes no write lock. Late chunks are found through the file's index
change log (`index_log`, appended by triggers whenever a document's current revision, status or
title changes): only the documents logged after the marker are checked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from kbmcp.embed.base import ModelFingerprint
from kbmcp.store.reembed import ChunkInput, StagedVector, input_hash
from kbmcp.store.sqlite.vectors import VEC_TABLE, record_model

# Every chunk of every document's current revision, with what its vector is computed from.
# One page of them: the service reads the current chunks a page at a time (memory stays flat).
SELECT_CURRENT_CHUNKS = """
SELECT c.id, d.title, c.heading_path, c.text
FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
WHERE c.id > :after
ORDER BY c.id
LIMIT :limit
"""
# The same, for some documents (those the index change log names).
SELECT_CURRENT_CHUNKS_OF = """
SELECT c.id, d.title, c.heading_path, c.text
FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
WHERE d.id IN (SELECT value FROM json_each(:document_ids))
ORDER BY c.id
"""
SELECT_LOG_POSITION = "SELECT coalesce(max(seq), 0) FROM index_log"
SELECT_LOGGED_DOCUMENTS = "SELECT DISTINCT document_id FROM index_log WHERE seq > :after"
SELECT_STAGED_INPUTS = """
SELECT chunk_id, input_hash FROM temp.reembed_vector
WHERE chunk_id IN (SELECT value FROM json_each(:chunk_ids))
"""

# The staged vectors: a TEMP table lives in this connection's temporary database, not the file.
CREATE_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS reembed_vector (
    chunk_id   INTEGER PRIMARY KEY,
    input_hash TEXT NOT NULL,  -- sha256 of the embedding input the vector was computed from
    embedding  BLOB NOT NULL
)
"""
CLEAR_STAGING = "DELETE FROM temp.reembed_vector"
DROP_STAGING = "DROP TABLE IF EXISTS temp.reembed_vector"
STAGE_VECTOR = """
INSERT OR REPLACE INTO temp.reembed_vector (chunk_id, input_hash, embedding)
VALUES (:chunk_id, :input_hash, :embedding)
"""
# The switch: the staged vectors of current chunks into the vector store, and of published
# documents' current chunks into the (new, empty) vec0 index. Chunks no longer current (replaced
# meanwhile) are left out.
COPY_STORED_VECTORS = """
INSERT INTO chunk_vector (chunk_id, embedding)
SELECT s.chunk_id, s.embedding
FROM temp.reembed_vector AS s
JOIN chunk AS c ON c.id = s.chunk_id
JOIN document AS d ON d.current_revision_id = c.revision_id
ORDER BY s.chunk_id
"""
COPY_INDEXED_VECTORS = f"""
INSERT INTO {VEC_TABLE} (rowid, embedding)
SELECT s.chunk_id, s.embedding
FROM temp.reembed_vector AS s
JOIN chunk AS c ON c.id = s.chunk_id
JOIN document AS d ON d.current_revision_id = c.revision_id
WHERE d.status = 'published'
ORDER BY s.chunk_id
"""
COUNT_CURRENT_CHUNKS = """
SELECT count(*) FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
"""


def start(conn: apsw.Connection) -> tuple[int, int]:
    position = conn.execute(SELECT_LOG_POSITION).fetchone()[0]
    count = conn.execute(COUNT_CURRENT_CHUNKS).fetchone()[0]
    conn.execute(CREATE_STAGING)
    conn.execute(CLEAR_STAGING)
    return position, count


def current_chunks(conn: apsw.Connection, after: int, limit: int) -> list[ChunkInput]:
    rows = conn.execute(SELECT_CURRENT_CHUNKS, {"after": after, "limit": limit})
    return [ChunkInput(*row) for row in rows]


def stage_vectors(conn: apsw.Connection, rows: Sequence[StagedVector]) -> None:
    conn.executemany(
        STAGE_VECTOR,
        [
            {"chunk_id": row.chunk_id, "input_hash": row.input_hash, "embedding": row.embedding}
            for row in rows
        ],
    )


def late_chunks(conn: apsw.Connection, marker: int) -> tuple[int, list[ChunkInput]]:
    now = conn.execute(SELECT_LOG_POSITION).fetchone()[0]
    if now == marker:
        return marker, []
    logged = conn.execute(SELECT_LOGGED_DOCUMENTS, {"after": marker})
    documents = [row[0] for row in logged]
    rows = [
        ChunkInput(*row)
        for row in conn.execute(SELECT_CURRENT_CHUNKS_OF, {"document_ids": json.dumps(documents)})
    ]
    staged = dict(
        conn.execute(
            SELECT_STAGED_INPUTS, {"chunk_ids": json.dumps([row.chunk_id for row in rows])}
        ).fetchall()
    )
    late = [row for row in rows if staged.get(row.chunk_id) != input_hash(row.embedding_input)]
    return now, late


def switch(conn: apsw.Connection, fingerprint: ModelFingerprint, marker: int) -> int | None:
    """(Inside BEGIN IMMEDIATE: no other writer until the commit.)"""
    if conn.execute(SELECT_LOG_POSITION).fetchone()[0] != marker:
        return None  # documents changed since the check: check them, then try again
    record_model(conn, fingerprint)
    conn.execute(COPY_STORED_VECTORS)
    # Only published documents are in the vec0 index; FTS5 rows do not depend on the model.
    conn.execute(COPY_INDEXED_VECTORS)
    return int(conn.execute(COUNT_CURRENT_CHUNKS).fetchone()[0])


def finish(conn: apsw.Connection) -> None:
    """(The vec0 index is filled by the switch.)"""


def drop_staging(conn: apsw.Connection) -> None:
    conn.execute(DROP_STAGING)
