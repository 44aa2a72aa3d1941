"""The vectors concern (kbmcp/store/vectors.py) on SQLite: the embedding-model record and the
vector tables.

Two tables hold vectors, both keyed by chunk id:
- `chunk_vector` (migration 2): the float32 vector of every chunk of each document's current
  revision, published or archived. Exact scans over an allowed set of rows read it, and a new
  revision reuses the vectors of unchanged chunk texts from it, so an edit re-embeds only what
  changed and an archived document comes back without embedding anything.
- `chunk_vec`: the sqlite-vec vec0 index over the chunks of published documents only. It is created
  here, not in a migration, because its column type carries the model's dimension.

A vec0 `bit[N]` index was tried as a coarse stage for large scopes and dropped: its top-k cost
grows with k (18 ms at k=100, 183 ms at k=800 for 100k rows). A long-lived process scores every
allowed vector in memory instead (kbmcp/store/sqlite/search/vector/matrix.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw

from kbmcp.clock import now_iso
from kbmcp.embed.base import ModelFingerprint
from kbmcp.store.vectors import model_matches

VEC_TABLE = "chunk_vec"

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


def recorded_model(conn: apsw.Connection) -> ModelFingerprint | None:
    row = conn.execute(SELECT_MODEL).fetchone()
    return None if row is None else ModelFingerprint(row[0], int(row[1]), row[2])


def check_model(conn: apsw.Connection, fingerprint: ModelFingerprint) -> bool:
    """True if the file's vectors come from `fingerprint`, False if no model is recorded yet;
    raises ModelMismatch if they come from another model."""
    return model_matches(recorded_model(conn), fingerprint, database="file")


def hold_model(conn: apsw.Connection, fingerprint: ModelFingerprint) -> None:
    """(BEGIN IMMEDIATE holds the whole file: the check is enough.)"""
    check_model(conn, fingerprint)


def record_model(conn: apsw.Connection, fingerprint: ModelFingerprint) -> None:
    """Record `fingerprint` as the file's model and (re)create an empty vector index for it.

    Inside a write transaction. Any stored vectors of another model are dropped with the index.
    """
    conn.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
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


def store_vectors(conn: apsw.Connection, rows: Sequence[tuple[int, bytes]]) -> None:
    conn.executemany(INSERT_STORED_VECTOR, rows)


def drop_stored_vectors(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    conn.executemany(DELETE_STORED_VECTOR, [(chunk_id,) for chunk_id in chunk_ids])


def index_vectors(
    conn: apsw.Connection, knowledge_base_id: int, rows: Sequence[tuple[int, bytes]]
) -> None:
    """`knowledge_base_id` is not kept here: a vec0 row is the chunk id and its vector."""
    conn.executemany(INSERT_INDEXED_VECTOR, rows)


def unindex_vectors(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    conn.executemany(DELETE_INDEXED_VECTOR, [(chunk_id,) for chunk_id in chunk_ids])
