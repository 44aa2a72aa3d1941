"""Putting a revision's chunks into the search indexes (FTS5 + vec0) and taking them out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from kbmcp.store.sqlite.vectors import index_vectors, unindex_vectors

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


@dataclass(frozen=True)
class IndexRow:
    chunk_id: int
    heading_path: Sequence[str]
    text: str
    embedding: bytes


def heading_text(heading_path: Sequence[str]) -> str:
    return " > ".join(heading_path)


def add_to_index(conn: apsw.Connection, title: str, rows: Sequence[IndexRow]) -> None:
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
    index_vectors(conn, [(row.chunk_id, row.embedding) for row in rows])


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
