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
from typing import Any

import psycopg

from kbmcp.store.index import IndexRow
from kbmcp.store.postgres import keyword
from kbmcp.store.postgres.vectors import index_vectors, unindex_vectors

PgConnection = psycopg.Connection[Any]

SELECT_INDEX_ROWS_OF_REVISION = """
SELECT c.id, c.heading_path, c.text, v.embedding
FROM chunk AS c
JOIN chunk_vector AS v ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
WHERE c.revision_id = %(revision_id)s
ORDER BY c.ordinal
"""
SELECT_CHUNK_IDS_OF_REVISION = "SELECT id FROM chunk WHERE revision_id = %(revision_id)s"
# The keyword side of a whole revision: its chunks' text and their store.
SELECT_KEYWORD_ROWS_OF_REVISION = """
SELECT c.knowledge_base_id, c.id, c.heading_path, c.text
FROM chunk AS c
WHERE c.revision_id = %(revision_id)s
ORDER BY c.id
"""
INDEX_VEC_OF_REVISION = """
INSERT INTO chunk_vec (chunk_id, knowledge_base_id, embedding)
SELECT c.id, c.knowledge_base_id, v.embedding
FROM chunk AS c
JOIN chunk_vector AS v ON v.knowledge_base_id = c.knowledge_base_id AND v.chunk_id = c.id
WHERE c.revision_id = %(revision_id)s
ORDER BY c.id
"""
# chunk_term rows go with their chunk_keyword row (ON DELETE CASCADE).
UNINDEX_KEYWORDS_OF_REVISION = """
DELETE FROM chunk_keyword
WHERE (chunk_id, knowledge_base_id) IN (
    SELECT id, knowledge_base_id FROM chunk WHERE revision_id = %(revision_id)s)
"""
UNINDEX_VEC_OF_REVISION = """
DELETE FROM chunk_vec
WHERE (chunk_id, knowledge_base_id) IN (
    SELECT id, knowledge_base_id FROM chunk WHERE revision_id = %(revision_id)s)
"""


def add_to_index(
    conn: PgConnection, knowledge_base_id: int, title: str, rows: Sequence[IndexRow]
) -> None:
    keyword.index_chunks(
        conn,
        [keyword.KeywordRow(knowledge_base_id, r.chunk_id, title, r.heading_path, r.text)
         for r in rows],
    )  # fmt: skip
    index_vectors(conn, knowledge_base_id, [(r.chunk_id, r.embedding) for r in rows])


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
