"""SQL for revisions written in parts (migration 10): a document too large for one short write
transaction gets its chunks and vectors over several, then one last transaction moves the search
indexes from the old revision's chunks to the new one's with set-based statements (no row passes
through Python: kbmcp/store/sqlite/index.py `index_revision`) and makes the revision current.
See kbmcp/service/ingest_write.py."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

# A new document whose first revision is being written: archived (so in no listing of published
# documents and no index) and without a current revision until the switch publishes it.
INSERT_STAGED_DOCUMENT = """
INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                      status, created_at, updated_at)
VALUES (:public_id, :kb_id, :path, :title, :kind, :source, :metadata, 'archived', :now, :now)
"""
INSERT_STAGED = """
INSERT INTO staged_revision (revision_id, document_id, chunking, updated_at)
VALUES (:revision_id, :document_id, :chunking, :now)
"""
TOUCH_STAGED = "UPDATE staged_revision SET updated_at = :now WHERE revision_id = :revision_id"
DELETE_STAGED = "DELETE FROM staged_revision WHERE revision_id = :revision_id"
# The staged revisions of a document that an interrupted run may have left: the one with the
# same content and chunking is resumed from its last written chunk.
SELECT_STAGED_OF_DOCUMENT = """
SELECT s.revision_id, r.public_id, r.content_hash, s.chunking
FROM staged_revision AS s JOIN revision AS r ON r.id = s.revision_id
WHERE s.document_id = :document_id
ORDER BY s.revision_id DESC
"""
# Written chunks of a staged revision, with whether each has its vector (a `kbmcp reembed` in
# between drops every stored vector: such a revision cannot be resumed).
SELECT_STAGED_CHUNKS = """
SELECT c.ordinal, c.char_start, c.char_end, c.heading_path, v.chunk_id IS NOT NULL
FROM chunk AS c LEFT JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
ORDER BY c.ordinal
"""
COUNT_CHUNKS_WITH_VECTORS = """
SELECT count(*), count(v.chunk_id)
FROM chunk AS c LEFT JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE c.revision_id = :revision_id
"""
# Staged revisions of a knowledge base that no run has written to since :before.
SELECT_STALE_STAGED = """
SELECT s.revision_id
FROM staged_revision AS s JOIN document AS d ON d.id = s.document_id
WHERE d.knowledge_base_id = :kb_id AND s.updated_at < :before
"""
# Dropping a revision's chunks a part at a time (chunk_vector rows go with them: ON DELETE
# CASCADE), then the revision itself (its staged_revision row cascades too).
DELETE_CHUNKS_PART = """
DELETE FROM chunk WHERE id IN (
    SELECT id FROM chunk WHERE revision_id = :revision_id ORDER BY ordinal DESC LIMIT :limit)
"""
DELETE_REVISION = "DELETE FROM revision WHERE id = :revision_id"
# The stored vectors of a revision that is no longer current, a part at a time.
DELETE_VECTORS_PART = """
DELETE FROM chunk_vector WHERE chunk_id IN (
    SELECT v.chunk_id FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
    WHERE c.revision_id = :revision_id LIMIT :limit)
"""


@dataclass(frozen=True)
class StagedChunk:
    ordinal: int
    char_start: int
    char_end: int
    heading_path: str  # JSON, as stored
    has_vector: bool


def staged_chunks(conn: apsw.Connection, revision_id: int) -> list[StagedChunk]:
    return [
        StagedChunk(ordinal, start, end, heading, bool(has_vector))
        for ordinal, start, end, heading, has_vector in conn.execute(
            SELECT_STAGED_CHUNKS, {"revision_id": revision_id}
        )
    ]


def chunks_and_vectors(conn: apsw.Connection, revision_id: int) -> tuple[int, int]:
    """How many chunks a revision has, and how many of them have a stored vector."""
    chunks, vectors = conn.execute(
        COUNT_CHUNKS_WITH_VECTORS, {"revision_id": revision_id}
    ).fetchone()
    return int(chunks), int(vectors)
