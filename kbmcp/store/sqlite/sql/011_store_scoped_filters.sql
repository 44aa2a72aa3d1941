-- Migration 11: the tag, metadata and path-prefix filters search within the readable stores.

-- They searched indexes on (key, value) and on (path) across every store, then kept the
-- documents of readable stores, so the work of resolving one caller's scope grew with other
-- tenants' documents carrying the same tag, metadata or path prefix, and a search's time told
-- the caller about data it cannot read (a tag-filtered search on a server: 3-4 ms with no such
-- documents elsewhere, 12-13 ms with 20,000 of them). Now every index a filter searches leads
-- with the knowledge base, and the filters read one range of it per readable store
-- (kbmcp/store/sqlite/search/scope.py), so their cost follows the caller's own data
-- (tests/test_scope_cost_isolation.py counts it).

-- Tags and metadata rows carry their document's knowledge base, copied when they are written (a
-- document never moves to another knowledge base, so the copy cannot go stale). SQLite cannot
-- add a NOT NULL column without a default, so both tables are rebuilt.
CREATE TABLE document_tag_next (
    document_id       INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    key               TEXT NOT NULL,
    value             TEXT NOT NULL,
    knowledge_base_id INTEGER NOT NULL,  -- document.knowledge_base_id of document_id
    PRIMARY KEY (document_id, key, value)
) WITHOUT ROWID;
INSERT INTO document_tag_next (document_id, key, value, knowledge_base_id)
SELECT t.document_id, t.key, t.value, d.knowledge_base_id
FROM document_tag AS t JOIN document AS d ON d.id = t.document_id;
DROP TABLE document_tag;
ALTER TABLE document_tag_next RENAME TO document_tag;
CREATE INDEX document_tag_by_store_pair ON document_tag(knowledge_base_id, key, value, document_id);

-- The triggers that fill document_metadata go first: ALTER TABLE ... RENAME checks every
-- trigger's body, and theirs names the table that is about to be dropped.
DROP TRIGGER document_metadata_on_insert;
DROP TRIGGER document_metadata_on_update;
CREATE TABLE document_metadata_next (
    document_id       INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    key               TEXT NOT NULL,
    type              TEXT NOT NULL,
    value,
    knowledge_base_id INTEGER NOT NULL,  -- document.knowledge_base_id of document_id
    PRIMARY KEY (document_id, key)
) WITHOUT ROWID;
INSERT INTO document_metadata_next (document_id, key, type, value, knowledge_base_id)
SELECT m.document_id, m.key, m.type, m.value, d.knowledge_base_id
FROM document_metadata AS m JOIN document AS d ON d.id = m.document_id;
DROP TABLE document_metadata;
ALTER TABLE document_metadata_next RENAME TO document_metadata;
CREATE INDEX document_metadata_by_store_pair
    ON document_metadata(knowledge_base_id, key, value, document_id);

CREATE TRIGGER document_metadata_on_insert AFTER INSERT ON document
BEGIN
    INSERT INTO document_metadata (document_id, key, type, value, knowledge_base_id)
    SELECT new.id, m.key, m.type, m.atom, new.knowledge_base_id FROM json_each(new.metadata) AS m;
END;

CREATE TRIGGER document_metadata_on_update AFTER UPDATE OF metadata ON document
WHEN old.metadata IS NOT new.metadata
BEGIN
    DELETE FROM document_metadata WHERE document_id = new.id;
    INSERT INTO document_metadata (document_id, key, type, value, knowledge_base_id)
    SELECT new.id, m.key, m.type, m.atom, new.knowledge_base_id FROM json_each(new.metadata) AS m;
END;

-- A path prefix is now a range of UNIQUE (knowledge_base_id, path) per readable store; the
-- index on path alone (migration 3) served the old filter only.
DROP INDEX document_by_path;
