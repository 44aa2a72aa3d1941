"""The index concern (kbmcp/store/index.py) on SQLite: chunks into FTS5 and the vec0 table, and
out of them."""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from kbmcp.store.index import IndexRow, heading_text
from kbmcp.store.sqlite.vectors import VEC_TABLE, index_vectors, unindex_vectors

__all__ = ["IndexRow", "heading_text"]

INSERT_FTS = """
INSERT INTO chunk_fts (rowid, title, heading, body) VALUES (:chunk_id, :title, :heading, :body)
"""
DELETE_FTS = "DELETE FROM chunk_fts WHERE rowid = :chunk_id"
SELECT_INDEX_ROWS_OF_REVISION = """
SELECT c.id, c.heading_path, c.text, v.embedding
FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
ORDER BY c.ordinal
"""
SELECT_CHUNK_IDS_OF_REVISION = "SELECT id FROM chunk WHERE revision_id = :revision_id"

# A whole revision in or out (a document written in parts, switched in one short transaction:
# kbmcp/service/ingest_write.py). The keyword index and the vec0 index leave the old revision's
# chunks and take the new one's, each in one statement. The FTS5 row is what add_to_index
# writes: title, the heading path joined with " > " ('' for none), the text.
# Trap: `rowid IN (SELECT ...)` is the form both FTS5 (contentless_delete) and vec0 delete by.
UNINDEX_FTS_OF_REVISION = """
DELETE FROM chunk_fts WHERE rowid IN (SELECT id FROM chunk WHERE revision_id = :revision_id)
"""
UNINDEX_VEC_OF_REVISION = f"""
DELETE FROM {VEC_TABLE} WHERE rowid IN (SELECT id FROM chunk WHERE revision_id = :revision_id)
"""
INDEX_FTS_OF_REVISION = """
INSERT INTO chunk_fts (rowid, title, heading, body)
SELECT c.id,
       :title,
       coalesce((SELECT group_concat(h.value, ' > ' ORDER BY h.key)
                 FROM json_each(c.heading_path) AS h), ''),
       c.text
FROM chunk AS c
WHERE c.revision_id = :revision_id
ORDER BY c.id
"""
INDEX_VEC_OF_REVISION = f"""
INSERT INTO {VEC_TABLE} (rowid, embedding)
SELECT c.id, v.embedding
FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
ORDER BY c.id
"""


def add_to_index(
    conn: apsw.Connection, knowledge_base_id: int, title: str, rows: Sequence[IndexRow]
) -> None:
    conn.executemany(
        INSERT_FTS,
        [
            {
                "chunk_id": row.chunk_id,
                "title": title,
                "heading": heading_text(row.heading_path),
                "body": row.text,
            }
            for row in rows
        ],
    )
    index_vectors(conn, knowledge_base_id, [(row.chunk_id, row.embedding) for row in rows])


def remove_from_index(conn: apsw.Connection, chunk_ids: Sequence[int]) -> None:
    conn.executemany(DELETE_FTS, [{"chunk_id": chunk_id} for chunk_id in chunk_ids])
    unindex_vectors(conn, chunk_ids)


def chunk_ids_of_revision(conn: apsw.Connection, revision_id: int) -> list[int]:
    return [
        row[0] for row in conn.execute(SELECT_CHUNK_IDS_OF_REVISION, {"revision_id": revision_id})
    ]


def index_rows_of_revision(conn: apsw.Connection, revision_id: int) -> list[IndexRow]:
    return [
        IndexRow(chunk_id, json.loads(heading), text, embedding)
        for chunk_id, heading, text, embedding in conn.execute(
            SELECT_INDEX_ROWS_OF_REVISION, {"revision_id": revision_id}
        )
    ]


def index_revision(conn: apsw.Connection, revision_id: int, title: str) -> None:
    params = {"revision_id": revision_id}
    conn.execute(INDEX_FTS_OF_REVISION, {**params, "title": title})
    conn.execute(INDEX_VEC_OF_REVISION, params)


def unindex_revision(conn: apsw.Connection, revision_id: int) -> None:
    params = {"revision_id": revision_id}
    conn.execute(UNINDEX_FTS_OF_REVISION, params)
    conn.execute(UNINDEX_VEC_OF_REVISION, params)
