"""Putting chunks into the search indexes on PostgreSQL and taking them out: what
kbmcp/store/sqlite/index.py does with FTS5 and vec0, here the keyword tables (keyword.py) and
chunk_vec (vectors.py). The same rows are indexed: the chunks of the current revision of a
published document, with the document's title, the heading path and the text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from kbmcp.store.postgres import keyword
from kbmcp.store.postgres.vectors import Float32Vector

# The index rows of every indexed chunk (the indexed_chunk view), with the vectors to index.
SELECT_INDEXED_ROWS = """
SELECT i.knowledge_base_id, d.title, c.id, c.heading_path, c.text, v.embedding
FROM indexed_chunk AS i
JOIN chunk AS c ON c.id = i.chunk_id
JOIN document AS d ON d.id = i.document_id
JOIN chunk_vector AS v ON v.chunk_id = c.id
ORDER BY c.id
"""
SELECT_INDEX_ROWS_OF_REVISION = """
SELECT d.knowledge_base_id, d.title, c.id, c.heading_path, c.text, v.embedding
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = %(revision_id)s
ORDER BY c.ordinal
"""
INSERT_INDEXED_VECTOR = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
VALUES (%(chunk_id)s, %(knowledge_base_id)s, %(embedding)b)
"""
DELETE_INDEXED_VECTORS = "DELETE FROM chunk_vec WHERE chunk_id = ANY(%(chunk_ids)s)"


@dataclass(frozen=True)
class IndexRow:
    """kbmcp/store/sqlite/index.py's IndexRow with the chunk's store and its document's title."""

    knowledge_base_id: int
    title: str
    chunk_id: int
    heading_path: Sequence[str]
    text: str
    embedding: bytes  # little-endian float32, as SQLite stores it


def add_to_index(conn: psycopg.Connection[Any], rows: Sequence[IndexRow]) -> None:
    """Index chunks (inside the caller's transaction): keyword rows and vectors."""
    if not rows:
        return
    keyword.index_chunks(
        conn,
        [keyword.KeywordRow(r.knowledge_base_id, r.chunk_id, r.title, r.heading_path, r.text)
         for r in rows],
    )  # fmt: skip
    with conn.cursor() as cur:
        cur.executemany(
            INSERT_INDEXED_VECTOR,
            [{"chunk_id": r.chunk_id, "knowledge_base_id": r.knowledge_base_id,
              "embedding": Float32Vector(r.embedding)} for r in rows],
        )  # fmt: skip


def remove_from_index(conn: psycopg.Connection[Any], chunk_ids: Sequence[int]) -> None:
    if chunk_ids:
        keyword.unindex_chunks(conn, chunk_ids)
        conn.execute(DELETE_INDEXED_VECTORS, {"chunk_ids": list(chunk_ids)})


def index_rows_of_revision(conn: psycopg.Connection[Any], revision_id: int) -> list[IndexRow]:
    with conn.cursor(binary=True) as cur:
        cur.execute(SELECT_INDEX_ROWS_OF_REVISION, {"revision_id": revision_id})
        return [_index_row(row) for row in cur]


def every_index_row(conn: psycopg.Connection[Any], batch: int = 2000) -> list[list[IndexRow]]:
    """Every indexed chunk's index row, in batches (rebuilding the indexes: `kbmcp copy`)."""
    with conn.cursor(binary=True) as cur:
        cur.execute(SELECT_INDEXED_ROWS)
        batches = []
        while rows := cur.fetchmany(batch):
            batches.append([_index_row(row) for row in rows])
        return batches


def _index_row(row: tuple[Any, ...]) -> IndexRow:
    kb_id, title, chunk_id, heading, text, embedding = row
    return IndexRow(kb_id, title, chunk_id, json.loads(heading), text, bytes(embedding))
