"""Vectors on PostgreSQL: pgvector's `vector` type in binary, the model record and the HNSW index.

A vector crosses the driver as pgvector's binary form (2-byte dimension, 2 unused bytes, then
big-endian float32s) and reaches kbmcp as the bytes SQLite stores (little-endian float32, see
kbmcp/store/sqlite/vectors.py): `Float32Vector`. So copying a vector between the backends is exact,
and no text formatting of floats is involved.

Tables (sql/001_schema.sql): `chunk_vector` (every current chunk, for reuse on edit) and
`chunk_vec` (the indexed chunks: SQLite's vec0 table). Recording a model gives chunk_vec's
column the model's dimension and an HNSW index (cosine), which large unscoped searches use
(kbmcp/store/postgres/vector_channel.py); exact scans over a scope read the same table by chunk id.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from kbmcp.clock import now_iso
from kbmcp.embed.base import ModelFingerprint
from kbmcp.errors import StoreError
from kbmcp.store.vectors import model_matches

SELECT_MODEL = "SELECT name, dimension, version FROM embedding_model WHERE id = 1"
# Multi-writer: a transaction writing vectors holds the model record in share mode, so a
# re-embed's switch (which updates it) waits for the transaction, and a transaction that starts
# after the switch reads the new model.
SELECT_MODEL_FOR_SHARE = f"{SELECT_MODEL} FOR SHARE"
UPSERT_MODEL = """
INSERT INTO embedding_model (id, name, dimension, version, recorded_at)
VALUES (1, %(name)s, %(dimension)s, %(version)s, %(recorded_at)s)
ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, dimension = excluded.dimension,
    version = excluded.version, recorded_at = excluded.recorded_at
"""
DROP_HNSW = "DROP INDEX IF EXISTS chunk_vec_hnsw"
# m and ef_construction: pgvector's defaults; recall is measured in bench/, not assumed.
CREATE_HNSW = "CREATE INDEX chunk_vec_hnsw ON chunk_vec USING hnsw (embedding vector_cosine_ops)"
HAS_HNSW = "SELECT to_regclass('chunk_vec_hnsw') IS NOT NULL"
CLEAR_VECTORS = "TRUNCATE chunk_vec, chunk_vector"
# The column type carries the dimension (an HNSW index needs it); {dimension} is an int.
SET_DIMENSION = """
ALTER TABLE chunk_vec ALTER COLUMN embedding TYPE vector({dimension})
"""
# A vector is in its chunk's store (migration 9), read once for all the chunks written
# (CHUNK_STORES): on Citus each insert then goes to its store's shard, where reading the store
# per vector would ask every shard once a vector.
CHUNK_STORES = "SELECT id, knowledge_base_id FROM chunk WHERE id = ANY(%(chunk_ids)s::bigint[])"
INSERT_STORED_VECTOR = """
INSERT INTO chunk_vector (chunk_id, knowledge_base_id, embedding)
VALUES (%(chunk_id)s, %(kb_id)s, %(embedding)b)
ON CONFLICT (chunk_id, knowledge_base_id) DO UPDATE SET embedding = excluded.embedding
"""
DELETE_STORED_VECTORS = "DELETE FROM chunk_vector WHERE chunk_id = ANY(%(chunk_ids)s::bigint[])"
INSERT_INDEXED_VECTOR = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
VALUES (%(chunk_id)s, %(knowledge_base_id)s, %(embedding)b)
"""
DELETE_INDEXED_VECTORS = "DELETE FROM chunk_vec WHERE chunk_id = ANY(%(chunk_ids)s::bigint[])"

_HEADER = struct.Struct(">HH")


class Float32Vector(bytes):
    """A vector as SQLite stores it: little-endian float32 bytes."""


def register_vector(conn: psycopg.Connection[Any]) -> None:
    """Teach the connection pgvector's binary form (a no-op before the extension exists)."""
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        return

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: Float32Vector) -> bytes:
            values = np.frombuffer(obj, dtype="<f4")
            return _HEADER.pack(len(values), 0) + values.astype(">f4").tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> Float32Vector:
            dimension, _ = _HEADER.unpack_from(data)
            values = np.frombuffer(data, dtype=">f4", count=dimension, offset=_HEADER.size)
            return Float32Vector(values.astype("<f4").tobytes())

    class VectorTextLoader(Loader):
        """Text results (the default): read binary results where exactness matters (`binary=
        True`); pgvector prints the shortest decimal that reads back as the same float32."""

        format = Format.TEXT

        def load(self, data: Any) -> Float32Vector:
            text = bytes(data).decode("ascii").strip("[]")
            values = np.array(text.split(",") if text else [], dtype=np.float32)
            return Float32Vector(values.astype("<f4").tobytes())

    conn.adapters.register_dumper(Float32Vector, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)
    conn.adapters.register_loader(info.oid, VectorTextLoader)


def recorded_model(conn: psycopg.Connection[Any]) -> ModelFingerprint | None:
    row = conn.execute(SELECT_MODEL).fetchone()
    return None if row is None else ModelFingerprint(row[0], int(row[1]), row[2])


def check_model(conn: psycopg.Connection[Any], fingerprint: ModelFingerprint) -> bool:
    """As kbmcp/store/sqlite/vectors.py's: False when no model is recorded, ModelMismatch when
    another."""
    return model_matches(recorded_model(conn), fingerprint, database="database")


def hold_model(conn: psycopg.Connection[Any], fingerprint: ModelFingerprint) -> None:
    row = conn.execute(SELECT_MODEL_FOR_SHARE).fetchone()
    recorded = None if row is None else ModelFingerprint(row[0], int(row[1]), row[2])
    model_matches(recorded, fingerprint, database="database")


def record_model(
    conn: psycopg.Connection[Any], fingerprint: ModelFingerprint, *, with_index: bool = True
) -> None:
    """Record the model and empty the vector tables for it (inside a transaction). `with_index`
    False leaves the HNSW index out, for a bulk load that builds it after (`build_index`)."""
    conn.execute(DROP_HNSW)
    conn.execute(CLEAR_VECTORS)
    conn.execute(SET_DIMENSION.format(dimension=int(fingerprint.dimension)))
    conn.execute(
        UPSERT_MODEL,
        {
            "name": fingerprint.name,
            "dimension": fingerprint.dimension,
            "version": fingerprint.version,
            "recorded_at": now_iso(),
        },
    )
    if with_index:
        build_index(conn)


def build_index(conn: psycopg.Connection[Any]) -> None:
    conn.execute(DROP_HNSW)
    conn.execute(CREATE_HNSW)


def has_index(conn: psycopg.Connection[Any]) -> bool:
    return bool(conn.execute(HAS_HNSW).fetchone()[0])


def store_vectors(conn: psycopg.Connection[Any], rows: Sequence[tuple[int, bytes]]) -> None:
    if not rows:
        return
    ids = [chunk_id for chunk_id, _ in rows]
    stores = dict(conn.execute(CHUNK_STORES, {"chunk_ids": ids}).fetchall())
    missing = [chunk_id for chunk_id in ids if chunk_id not in stores]
    if missing:
        raise StoreError(f"chunks {missing[:5]} do not exist: their vectors cannot be kept")
    with conn.cursor() as cur:
        cur.executemany(
            INSERT_STORED_VECTOR,
            [{"chunk_id": i, "kb_id": stores[i], "embedding": Float32Vector(blob)}
             for i, blob in rows],
        )  # fmt: skip


def drop_stored_vectors(conn: psycopg.Connection[Any], chunk_ids: Iterable[int]) -> None:
    ids = list(chunk_ids)
    if ids:
        conn.execute(DELETE_STORED_VECTORS, {"chunk_ids": ids})


def index_vectors(
    conn: psycopg.Connection[Any], knowledge_base_id: int, rows: Sequence[tuple[int, bytes]]
) -> None:
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            INSERT_INDEXED_VECTOR,
            [
                {"chunk_id": i, "knowledge_base_id": knowledge_base_id,
                 "embedding": Float32Vector(blob)}
                for i, blob in rows
            ],
        )  # fmt: skip


def unindex_vectors(conn: psycopg.Connection[Any], chunk_ids: Iterable[int]) -> None:
    ids = list(chunk_ids)
    if ids:
        conn.execute(DELETE_INDEXED_VECTORS, {"chunk_ids": ids})
