"""The embedding-model record and the vector tables.

Two tables hold vectors, both keyed by chunk id:
- `chunk_vector` (migration 2): the float32 vector of every chunk of each document's current
  revision, published or archived. Exact scans over an allowed set of rows read it, and a new
  revision reuses the vectors of unchanged chunk texts from it, so an edit re-embeds only what
  changed and an archived document comes back without embedding anything.
- `chunk_vec`: the sqlite-vec vec0 index over the chunks of published documents only. It is created
  here, not in a migration, because its column type carries the model's dimension.
- `chunk_vec_bit`: a vec0 `bit[N]` index of the same rows, each vector quantised to its signs.
  A Hamming scan of 100k x 384 bits takes ~5 ms where the float vec0 scan takes ~85 ms: search
  uses it as the coarse stage for large scopes and re-ranks its candidates exactly from
  `chunk_vector` (see kbmcp/search/semantic.py). Files made before it existed get it built on
  first use (`ensure_binary_index`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw
import numpy as np

from kbmcp.clock import now_iso
from kbmcp.embed.base import ModelFingerprint
from kbmcp.errors import ModelMismatch

VEC_TABLE = "chunk_vec"
BIT_TABLE = "chunk_vec_bit"

SELECT_MODEL = "SELECT name, dimension, version FROM embedding_model WHERE id = 1"
UPSERT_MODEL = """
INSERT INTO embedding_model (id, name, dimension, version, recorded_at)
VALUES (1, :name, :dimension, :version, :recorded_at)
ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, dimension = excluded.dimension,
    version = excluded.version, recorded_at = excluded.recorded_at
"""
INSERT_STORED_VECTOR = "INSERT OR REPLACE INTO chunk_vector (chunk_id, embedding) VALUES (?, ?)"
DELETE_STORED_VECTOR = "DELETE FROM chunk_vector WHERE chunk_id = ?"
INSERT_INDEXED_VECTOR = f"INSERT INTO {VEC_TABLE} (rowid, embedding) VALUES (?, ?)"
DELETE_INDEXED_VECTOR = f"DELETE FROM {VEC_TABLE} WHERE rowid = ?"
INSERT_BIT_VECTOR = f"INSERT INTO {BIT_TABLE} (rowid, embedding) VALUES (?, vec_quantize_binary(?))"
DELETE_BIT_VECTOR = f"DELETE FROM {BIT_TABLE} WHERE rowid = ?"
HAS_BIT_TABLE = "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?"
# The rows of chunk_vec: vectors of the current revisions of published documents.
SELECT_INDEXED_VECTORS = """
SELECT v.chunk_id, v.embedding
FROM document AS d
JOIN chunk AS c ON c.revision_id = d.current_revision_id
JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE d.status = 'published'
"""


def to_blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


def recorded_model(conn: apsw.Connection) -> ModelFingerprint | None:
    row = conn.execute(SELECT_MODEL).fetchone()
    return None if row is None else ModelFingerprint(row[0], int(row[1]), row[2])


def check_model(conn: apsw.Connection, fingerprint: ModelFingerprint) -> bool:
    """True if the file's vectors come from `fingerprint`, False if no model is recorded yet;
    raises ModelMismatch if they come from another model."""
    recorded = recorded_model(conn)
    if recorded is None:
        return False
    if recorded != fingerprint:
        raise ModelMismatch(
            f"this file was built with the embedding model {recorded.describe()}, but the "
            f"configured model is {fingerprint.describe()}; run `kbmcp reembed` to re-embed "
            "every document with the configured model, or configure the recorded model "
            "(KBMCP_EMBEDDER)",
            details={"recorded": recorded.__dict__, "configured": fingerprint.__dict__},
        )
    return True


def record_model(conn: apsw.Connection, fingerprint: ModelFingerprint) -> None:
    """Record `fingerprint` as the file's model and (re)create an empty vector index for it.

    Inside a write transaction. Any stored vectors of another model are dropped with the index.
    """
    conn.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
    conn.execute(f"DROP TABLE IF EXISTS {BIT_TABLE}")
    conn.execute("DELETE FROM chunk_vector")
    conn.execute(
        UPSERT_MODEL,
        {
            "name": fingerprint.name,
            "dimension": fingerprint.dimension,
            "version": fingerprint.version,
            "recorded_at": now_iso(),
        },
    )
    conn.execute(
        f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0("
        f"embedding float[{int(fingerprint.dimension)}] distance_metric=cosine)"
    )
    _create_bit_table(conn, fingerprint.dimension)


def _create_bit_table(conn: apsw.Connection, dimension: int) -> None:
    conn.execute(f"CREATE VIRTUAL TABLE {BIT_TABLE} USING vec0(embedding bit[{int(dimension)}])")


def ensure_binary_index(conn: apsw.Connection) -> bool:
    """Build the binary index from the stored vectors if this file predates it (inside a write
    transaction). Returns True if it had to be built."""
    if conn.execute(HAS_BIT_TABLE, (BIT_TABLE,)).fetchone() is not None:
        return False
    recorded = recorded_model(conn)
    if recorded is None:
        return False
    _create_bit_table(conn, recorded.dimension)
    conn.executemany(INSERT_BIT_VECTOR, conn.execute(SELECT_INDEXED_VECTORS).fetchall())
    return True


def has_binary_index(conn: apsw.Connection) -> bool:
    return conn.execute(HAS_BIT_TABLE, (BIT_TABLE,)).fetchone() is not None


def store_vectors(conn: apsw.Connection, rows: Sequence[tuple[int, bytes]]) -> None:
    conn.executemany(INSERT_STORED_VECTOR, rows)


def drop_stored_vectors(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    conn.executemany(DELETE_STORED_VECTOR, [(chunk_id,) for chunk_id in chunk_ids])


def index_vectors(conn: apsw.Connection, rows: Sequence[tuple[int, bytes]]) -> None:
    conn.executemany(INSERT_INDEXED_VECTOR, rows)
    conn.executemany(INSERT_BIT_VECTOR, rows)


def unindex_vectors(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    ids = [(chunk_id,) for chunk_id in chunk_ids]
    conn.executemany(DELETE_INDEXED_VECTOR, ids)
    conn.executemany(DELETE_BIT_VECTOR, ids)
