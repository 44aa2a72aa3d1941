"""`kbmcp reembed`: every current chunk embedded again with the configured model, which becomes
the file's model.

Vectors are computed first, outside any transaction and without the workspace lock (the rule in
docs/architecture.md), and staged in a temporary table of this connection (a TEMP table is not
part of the file: filling it takes no write lock, and memory stays flat at any size). The
switch (drop the old vectors and index, copy the staged ones in) is then one transaction of
set-based statements, so searches see either the old model's vectors or the new one's, never a
mix, and the write lock is held for the copy alone (docs/ingest.md gives its duration).

Chunks that another writer adds or retitles meanwhile are found through the file's index change
log (`index_log`, appended by triggers whenever a document's current revision, status or title
changes): only the documents logged since the vectors were computed are checked. When the log
moves inside the switch's transaction, the switch is abandoned, the late chunks are embedded
outside it, and it is tried again (at most REEMBED_ROUNDS times).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from kbmcp.access import ADMIN, Principal
from kbmcp.embed.base import Embedder
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import StoreError
from kbmcp.store.sqlite.connection import write_transaction
from kbmcp.store.sqlite.vectors import VEC_TABLE, record_model, recorded_model
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace

REEMBED_BATCH = 256
REEMBED_ROUNDS = 5

# Every chunk of every document's current revision, with what its vector is computed from.
SELECT_CURRENT_CHUNKS = """
SELECT c.id, d.title, c.heading_path, c.text
FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
ORDER BY c.id
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


def reembed(
    workspace: Workspace,
    principal: Principal,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Re-embed every current chunk with the configured model and record it as the file's model
    (see the module docstring). Needs the administrator scope."""
    principal.require(ADMIN)
    started = time.perf_counter()
    conn = workspace.conn
    embedder = workspace.embedder
    with workspace.lock:
        position = conn.execute(SELECT_LOG_POSITION).fetchone()[0]
        rows = conn.execute(SELECT_CURRENT_CHUNKS).fetchall()
        conn.execute(CREATE_STAGING)
        conn.execute(CLEAR_STAGING)
    try:
        _stage(workspace, embedder, rows, progress)
        for _round in range(REEMBED_ROUNDS):
            position = _catch_up(workspace, embedder, position)
            with workspace.lock, write_transaction(conn):
                if conn.execute(SELECT_LOG_POSITION).fetchone()[0] != position:
                    continue  # documents changed since the check: check them, then try again
                previous = recorded_model(conn)
                record_model(conn, embedder.fingerprint)
                conn.execute(COPY_STORED_VECTORS)
                # Only published documents are in the vec0 index; FTS5 rows do not depend on
                # the model.
                conn.execute(COPY_INDEXED_VECTORS)
                chunks = conn.execute(COUNT_CURRENT_CHUNKS).fetchone()[0]
            break
        else:
            raise StoreError(
                f"documents kept changing while re-embedding ({REEMBED_ROUNDS} tries): "
                "run `kbmcp reembed` again when ingest is quieter",
                details={"rounds": REEMBED_ROUNDS},
            )
    finally:
        with workspace.lock:
            conn.execute(DROP_STAGING)
    return {
        "previous_model": None if previous is None else previous.__dict__,
        "model": embedder.fingerprint.__dict__,
        "chunks": chunks,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _catch_up(workspace: Workspace, embedder: Embedder, position: int) -> int:
    """Embed the current chunks of documents logged after `position` whose staged vector is
    missing or was computed from another input (a new revision, a new title). Returns the log
    position this check covers."""
    conn = workspace.conn
    while True:
        with workspace.lock:
            now = conn.execute(SELECT_LOG_POSITION).fetchone()[0]
            if now == position:
                return position
            logged = conn.execute(SELECT_LOGGED_DOCUMENTS, {"after": position})
            documents = [row[0] for row in logged]
            rows = conn.execute(
                SELECT_CURRENT_CHUNKS_OF, {"document_ids": json.dumps(documents)}
            ).fetchall()
            staged = dict(
                conn.execute(
                    SELECT_STAGED_INPUTS, {"chunk_ids": json.dumps([row[0] for row in rows])}
                ).fetchall()
            )
        late = [row for row in rows if staged.get(row[0]) != _input_hash(_input_of(row))]
        _stage(workspace, embedder, late, None)
        position = now


def _stage(
    workspace: Workspace,
    embedder: Embedder,
    rows: list[tuple],
    progress: Callable[[int, int], None] | None,
) -> None:
    """Embed rows of SELECT_CURRENT_CHUNKS in batches into the staging table."""
    for start in range(0, len(rows), REEMBED_BATCH):
        batch = rows[start : start + REEMBED_BATCH]
        inputs = [_input_of(row) for row in batch]
        embedded = embedder.embed(inputs)
        with workspace.lock:
            workspace.conn.executemany(
                STAGE_VECTOR, _staged_rows(batch, inputs, (to_blob(v) for v in embedded))
            )
        if progress:
            progress(min(start + REEMBED_BATCH, len(rows)), len(rows))


def _staged_rows(
    rows: list[tuple], inputs: list[str], vectors: Iterable[bytes]
) -> list[dict[str, Any]]:
    return [
        {"chunk_id": row[0], "input_hash": _input_hash(text), "embedding": vector}
        for row, text, vector in zip(rows, inputs, vectors, strict=True)
    ]


def _input_of(row: tuple) -> str:
    _chunk_id, title, heading, text = row
    return chunk_embedding_input(title, json.loads(heading), text)


def _input_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
