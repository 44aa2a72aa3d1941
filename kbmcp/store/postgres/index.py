"""The index concern (kbmcp/store/index.py) on PostgreSQL: what kbmcp/store/sqlite/index.py does
with FTS5 and vec0, here with the keyword tables (keyword.py) and chunk_vec (vectors.py). The
same rows are indexed: the chunks of the current revision of a published document, with the
document's title, the heading path and the text.

Keyword rows are tokenised in Python (FTS5's tokenizer, keyword.py), so indexing a revision
reads its chunks' text; vectors never leave the server when a whole revision is indexed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from kbmcp.store.index import IndexRow
from kbmcp.store.postgres import keyword
from kbmcp.store.postgres.vectors import Float32Vector, index_vectors, unindex_vectors

PgConnection = psycopg.Connection[Any]

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
SELECT c.id, c.heading_path, c.text, v.embedding
FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = %(revision_id)s
ORDER BY c.ordinal
"""
SELECT_CHUNK_IDS_OF_REVISION = "SELECT id FROM chunk WHERE revision_id = %(revision_id)s"
# The keyword side of a whole revision: its chunks' text and their document's store.
SELECT_KEYWORD_ROWS_OF_REVISION = """
SELECT d.knowledge_base_id, c.id, c.heading_path, c.text
FROM chunk AS c
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
WHERE c.revision_id = %(revision_id)s
ORDER BY c.id
"""
INDEX_VEC_OF_REVISION = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
SELECT c.id, d.knowledge_base_id, v.embedding
FROM chunk AS c
JOIN chunk_vector AS v ON v.chunk_id = c.id
JOIN revision AS r ON r.id = c.revision_id
JOIN document AS d ON d.id = r.document_id
WHERE c.revision_id = %(revision_id)s
ORDER BY c.id
"""
INSERT_INDEXED_VECTOR = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
VALUES (%(chunk_id)s, %(knowledge_base_id)s, %(embedding)b)
"""
# chunk_term rows go with their chunk_keyword row (ON DELETE CASCADE).
UNINDEX_KEYWORDS_OF_REVISION = """
DELETE FROM chunk_keyword
WHERE chunk_id IN (SELECT id FROM chunk WHERE revision_id = %(revision_id)s)
"""
UNINDEX_VEC_OF_REVISION = """
DELETE FROM chunk_vec WHERE chunk_id IN (SELECT id FROM chunk WHERE revision_id = %(revision_id)s)
"""


@dataclass(frozen=True)
class DocumentIndexRow:
    """An index row with its chunk's store and its document's title: rows of many documents
    indexed at once (`add_rows`, rebuilding the indexes of a copied database)."""

    knowledge_base_id: int
    title: str
    chunk_id: int
    heading_path: Sequence[str]
    text: str
    embedding: bytes  # little-endian float32, as SQLite stores it


def add_to_index(
    conn: PgConnection, knowledge_base_id: int, title: str, rows: Sequence[IndexRow]
) -> None:
    keyword.index_chunks(
        conn,
        [keyword.KeywordRow(knowledge_base_id, r.chunk_id, title, r.heading_path, r.text)
         for r in rows],
    )  # fmt: skip
    index_vectors(conn, knowledge_base_id, [(r.chunk_id, r.embedding) for r in rows])


def add_rows(conn: PgConnection, rows: Sequence[DocumentIndexRow]) -> None:
    """Index chunks of any documents (inside the caller's transaction)."""
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


def remove_from_index(conn: PgConnection, chunk_ids: Sequence[int]) -> None:
    if chunk_ids:
        keyword.unindex_chunks(conn, chunk_ids)
        unindex_vectors(conn, chunk_ids)


def chunk_ids_of_revision(conn: PgConnection, revision_id: int) -> list[int]:
    return [
        row[0] for row in conn.execute(SELECT_CHUNK_IDS_OF_REVISION, {"revision_id": revision_id})
    ]


def index_rows_of_revision(conn: PgConnection, revision_id: int) -> list[IndexRow]:
    with conn.cursor(binary=True) as cur:
        cur.execute(SELECT_INDEX_ROWS_OF_REVISION, {"revision_id": revision_id})
        return [
            IndexRow(chunk_id, json.loads(heading), text, bytes(embedding))
            for chunk_id, heading, text, embedding in cur
        ]


def index_revision(conn: PgConnection, revision_id: int, title: str) -> None:
    rows = conn.execute(SELECT_KEYWORD_ROWS_OF_REVISION, {"revision_id": revision_id}).fetchall()
    keyword.index_chunks(
        conn,
        [keyword.KeywordRow(kb_id, chunk_id, title, json.loads(heading), text)
         for kb_id, chunk_id, heading, text in rows],
    )  # fmt: skip
    conn.execute(INDEX_VEC_OF_REVISION, {"revision_id": revision_id})


def unindex_revision(conn: PgConnection, revision_id: int) -> None:
    params = {"revision_id": revision_id}
    conn.execute(UNINDEX_KEYWORDS_OF_REVISION, params)
    conn.execute(UNINDEX_VEC_OF_REVISION, params)


def every_index_row(conn: PgConnection, batch: int = 2000) -> list[list[DocumentIndexRow]]:
    """Every indexed chunk's index row, in batches (rebuilding the indexes: `kbmcp copy`)."""
    with conn.cursor(binary=True) as cur:
        cur.execute(SELECT_INDEXED_ROWS)
        batches = []
        while rows := cur.fetchmany(batch):
            batches.append([_document_index_row(row) for row in rows])
        return batches


def _document_index_row(row: tuple[Any, ...]) -> DocumentIndexRow:
    kb_id, title, chunk_id, heading, text, embedding = row
    return DocumentIndexRow(kb_id, title, chunk_id, json.loads(heading), text, bytes(embedding))
