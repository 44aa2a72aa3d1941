-- Migration 10 (PostgreSQL): each document's current revision's chunk range, on the document.
--
-- A filtered search's first statement turns its scope documents into runs of chunk ids
-- (scope.py, SCOPE_RUN_CTES). With the range on the revision (migration 8) that was two probes
-- per document, the document's row and then its current revision's range: for a 10% scope of
-- the 100k-chunk bench (1,000 documents) the statement took 3.16 ms, 2.28 ms with the range
-- read from the document row (median of 40 alternated runs). Kept by triggers, as migration 8's
-- ranges are, so no writer can forget them.
ALTER TABLE document
    ADD COLUMN current_first_chunk_id bigint,
    ADD COLUMN current_last_chunk_id bigint,
    ADD COLUMN current_chunk_count integer NOT NULL DEFAULT 0;

UPDATE document AS d
SET current_first_chunk_id = r.first_chunk_id, current_last_chunk_id = r.last_chunk_id,
    current_chunk_count = r.chunk_count
FROM revision AS r
WHERE r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id;

-- The documents whose current revision's range changed (the trigger below).
CREATE INDEX document_current_revision ON document (knowledge_base_id, current_revision_id);

-- Trap (Citus): a trigger on a distributed table needs this setting in the transaction that
-- makes it (citus.py); on a server without Citus it is a placeholder setting, ignored.
SET LOCAL citus.enable_unsafe_triggers TO on;

-- A document pointed at a revision takes that revision's range (none: no chunks).
CREATE FUNCTION document_chunk_range_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT r.first_chunk_id, r.last_chunk_id, r.chunk_count
    INTO NEW.current_first_chunk_id, NEW.current_last_chunk_id, NEW.current_chunk_count
    FROM revision AS r
    WHERE r.knowledge_base_id = NEW.knowledge_base_id AND r.id = NEW.current_revision_id;
    NEW.current_chunk_count := coalesce(NEW.current_chunk_count, 0);
    RETURN NEW;
END $$;

CREATE TRIGGER document_chunk_range_on_write
BEFORE INSERT OR UPDATE OF current_revision_id ON document
FOR EACH ROW EXECUTE FUNCTION document_chunk_range_copy();

-- A revision whose range changed (migration 8's triggers, as its chunks go in or out), or that
-- is written with one, passes it on to the documents it is current for. Same store:
-- co-located on Citus.
CREATE FUNCTION document_chunk_range_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE document AS d
    SET current_first_chunk_id = NEW.first_chunk_id, current_last_chunk_id = NEW.last_chunk_id,
        current_chunk_count = NEW.chunk_count
    WHERE d.knowledge_base_id = NEW.knowledge_base_id AND d.current_revision_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER document_chunk_range_on_revision
AFTER UPDATE OF first_chunk_id, last_chunk_id, chunk_count ON revision
FOR EACH ROW
WHEN (OLD.first_chunk_id IS DISTINCT FROM NEW.first_chunk_id
      OR OLD.last_chunk_id IS DISTINCT FROM NEW.last_chunk_id
      OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count)
EXECUTE FUNCTION document_chunk_range_follow();

CREATE TRIGGER document_chunk_range_on_new_revision
AFTER INSERT ON revision
FOR EACH ROW WHEN (NEW.chunk_count > 0)
EXECUTE FUNCTION document_chunk_range_follow();
