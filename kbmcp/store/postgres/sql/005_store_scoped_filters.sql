-- Migration 5 (PostgreSQL; SQLite migration 11): the tag, metadata and path-prefix filters
-- search within the readable stores.
--
-- They searched indexes on (key, value) and on (path) across every store, then kept the
-- documents of readable stores, so the work of resolving one caller's scope grew with other
-- tenants' documents carrying the same tag, metadata or path prefix, and a search's time told
-- the caller about data it cannot read. Now every index a filter searches leads with the
-- knowledge base, and the filters read one range of it per readable store
-- (kbmcp/store/postgres/scope.py). It is also the distribution column's place on a distributed
-- PostgreSQL (docs/scale-out.md).
--
-- Tags and metadata rows carry their document's knowledge base, copied when they are written
-- (a document never moves to another knowledge base, so the copy cannot go stale).
ALTER TABLE document_tag ADD COLUMN knowledge_base_id bigint;
UPDATE document_tag AS t SET knowledge_base_id = d.knowledge_base_id
FROM document AS d WHERE d.id = t.document_id;
ALTER TABLE document_tag ALTER COLUMN knowledge_base_id SET NOT NULL;
DROP INDEX document_tag_by_pair;
CREATE INDEX document_tag_by_store_pair ON document_tag (knowledge_base_id, key, value, document_id);

ALTER TABLE document_metadata ADD COLUMN knowledge_base_id bigint;
UPDATE document_metadata AS m SET knowledge_base_id = d.knowledge_base_id
FROM document AS d WHERE d.id = m.document_id;
ALTER TABLE document_metadata ALTER COLUMN knowledge_base_id SET NOT NULL;
DROP INDEX document_metadata_by_pair;
CREATE INDEX document_metadata_by_store_pair
    ON document_metadata (knowledge_base_id, key, value, document_id);

CREATE OR REPLACE FUNCTION document_metadata_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.metadata::text IS NOT DISTINCT FROM OLD.metadata::text THEN
            RETURN NULL;
        END IF;
        DELETE FROM document_metadata WHERE document_id = NEW.id;
    END IF;
    INSERT INTO document_metadata (document_id, key, type, value, knowledge_base_id)
    SELECT NEW.id, m.key,
           CASE json_typeof(m.value)
               WHEN 'string' THEN 'text'
               WHEN 'boolean' THEN m.value::text
               WHEN 'null' THEN 'null'
               -- SQLite's json_each: a number with a fraction or an exponent is 'real'
               WHEN 'number' THEN CASE WHEN m.value::text ~ '[.eE]' THEN 'real' ELSE 'integer' END
               ELSE json_typeof(m.value)
           END,
           m.value::jsonb,
           NEW.knowledge_base_id
    FROM json_each(NEW.metadata) AS m;
    RETURN NULL;
END $$;

-- A path prefix is a range of this index per readable store (COLLATE "C": byte order, as
-- SQLite's BINARY). It replaces the index on path alone, which served the old filter only.
DROP INDEX document_by_path;
CREATE INDEX document_by_store_path ON document (knowledge_base_id, path COLLATE "C");
