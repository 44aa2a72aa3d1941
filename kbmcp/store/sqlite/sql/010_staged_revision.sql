-- Migration 10: revisions being written in parts.
--
-- A document with more chunks than one write transaction may hold (KBMCP_WRITE_BATCH_CHUNKS) is
-- written as a revision whose chunks and vectors arrive over several short transactions, while
-- the document keeps its current revision; a last short transaction puts the new chunks into
-- the search indexes and makes the revision current (kbmcp/service/ingest_write.py). Until then
-- the revision is listed here: it is in no index, and an ingest that was interrupted resumes it
-- (same content, same chunking) instead of starting again. `chunking` is the chunking signature
-- its chunks were cut with; `updated_at` says when a part was last written, so revisions that no
-- run came back for can be dropped.
CREATE TABLE staged_revision (
    revision_id INTEGER PRIMARY KEY REFERENCES revision(id) ON DELETE CASCADE,
    document_id INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    chunking    TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX staged_revision_by_document ON staged_revision(document_id);
