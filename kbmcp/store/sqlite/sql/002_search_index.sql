-- Migration 2: the keyword index and the exact vector store.

-- Contentless FTS5 (the text lives in `chunk`), rowid = chunk.id. `contentless_delete=1` lets a
-- re-indexed document delete its old rows. Porter stemming: measured on SciFact (docs/retrieval-quality.md).
CREATE VIRTUAL TABLE chunk_fts USING fts5(
    title, heading, body,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- float32 vectors of indexed chunks, for exact scans over an allowed set of rows. The vec0 index
-- (dimension-dependent) is created when a model is first recorded: see kbmcp/store/vectors.py.
CREATE TABLE chunk_vector (
    chunk_id  INTEGER PRIMARY KEY REFERENCES chunk(id) ON DELETE CASCADE,
    embedding BLOB NOT NULL
);
