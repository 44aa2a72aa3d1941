-- Migration 4: one definition of "indexed", indexed tag and metadata filters, and a change log
-- that lets a long-lived process update its in-memory search copies instead of dropping them.

-- The chunks that are in the search indexes (chunk_fts, chunk_vec): those of the current
-- revision of a published document. Every reader that means "searchable" reads this view.
CREATE VIEW indexed_chunk AS
SELECT c.id AS chunk_id,
       c.public_id AS chunk_public_id,
       c.revision_id,
       d.id AS document_id,
       d.knowledge_base_id
FROM document AS d
JOIN chunk AS c ON c.revision_id = d.current_revision_id
WHERE d.status = 'published';

-- Document metadata as rows, kept equal to document.metadata by the triggers below, so that a
-- metadata filter is an index search on (key, value) instead of json_each over every document
-- (kbmcp/search/scope.py). `type` is json_each's type name (text, integer, real, true, false,
-- null); `value` keeps SQLite's own type (true/false are 1/0), so numbers compare numerically.
CREATE TABLE document_metadata (
    document_id INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    type        TEXT NOT NULL,
    value,
    PRIMARY KEY (document_id, key)
) WITHOUT ROWID;
CREATE INDEX document_metadata_by_pair ON document_metadata(key, value, document_id);

CREATE TRIGGER document_metadata_on_insert AFTER INSERT ON document
BEGIN
    INSERT INTO document_metadata (document_id, key, type, value)
    SELECT new.id, m.key, m.type, m.atom FROM json_each(new.metadata) AS m;
END;

CREATE TRIGGER document_metadata_on_update AFTER UPDATE OF metadata ON document
WHEN old.metadata IS NOT new.metadata
BEGIN
    DELETE FROM document_metadata WHERE document_id = new.id;
    INSERT INTO document_metadata (document_id, key, type, value)
    SELECT new.id, m.key, m.type, m.atom FROM json_each(new.metadata) AS m;
END;

INSERT INTO document_metadata (document_id, key, type, value)
SELECT d.id, m.key, m.type, m.atom FROM document AS d, json_each(d.metadata) AS m;

-- Every change to which chunks of a document are indexed, or to the text they are indexed with
-- (the title is an FTS5 column), appends the document here. A process that keeps copies of the
-- indexes (kbmcp/search/accelerator.py) remembers the last `seq` it applied and re-reads only the
-- documents logged after it. Triggers, not the ingest code, write it, so no writer can forget.
CREATE TABLE index_log (
    seq         INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL
);

CREATE TRIGGER index_log_on_insert AFTER INSERT ON document
BEGIN
    INSERT INTO index_log (document_id) VALUES (new.id);
END;

CREATE TRIGGER index_log_on_update AFTER UPDATE OF current_revision_id, status, title ON document
WHEN old.current_revision_id IS NOT new.current_revision_id
  OR old.status IS NOT new.status
  OR old.title IS NOT new.title
BEGIN
    INSERT INTO index_log (document_id) VALUES (new.id);
END;
