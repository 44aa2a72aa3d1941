-- Migration 12: a revision's text is its last column.
--
-- SQLite stores a row's columns in order, and a row larger than a page continues on a chain of
-- overflow pages that can only be walked from its start. `content` (the revision's whole text)
-- came before content_hash, char_count, line_count and created_at, so reading any of those of a
-- large document walked the chain through the text: every search result cites its revision's
-- content_hash, listings read char_count. Outside the memory-mapped part of the file (the first
-- 1 GiB) that cost ~0.25 ms a result for 2 MB documents (25 ms for 100 results from three such
-- documents), ~5 us within it; with the text last, those columns lie on the row's first page
-- (~0.5 us).
--
-- SQLite cannot move a column, so the table is rebuilt (the generalized ALTER TABLE procedure
-- of SQLite's documentation): ids are kept, so every reference (chunk, staged_revision,
-- document.current_revision_id) still holds. migrate() runs migrations with foreign keys off
-- and checks them before committing: with them on, DROP TABLE would delete every revision
-- first, and ON DELETE CASCADE every chunk with it.
CREATE TABLE revision_next (
    id           INTEGER PRIMARY KEY,
    public_id    TEXT NOT NULL UNIQUE,
    document_id  INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    number       INTEGER NOT NULL,               -- 1, 2, ... per document
    content_hash TEXT NOT NULL,                  -- sha256 of the UTF-8 content
    char_count   INTEGER NOT NULL,
    line_count   INTEGER NOT NULL,
    created_at   TEXT NOT NULL,
    content      TEXT NOT NULL,                  -- last: see above
    UNIQUE (document_id, number)
);
INSERT INTO revision_next (id, public_id, document_id, number, content_hash, char_count,
                           line_count, created_at, content)
SELECT id, public_id, document_id, number, content_hash, char_count, line_count, created_at,
       content
FROM revision;
DROP TABLE revision;
ALTER TABLE revision_next RENAME TO revision;
CREATE INDEX revision_by_content_hash ON revision(content_hash);
