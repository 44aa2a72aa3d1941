-- Migration 8 (PostgreSQL): each revision's first and last chunk id and its chunk count.
--
-- A filtered search reads its scope as runs of consecutive chunk ids (scope.py, SCOPE_RUNS):
-- per scope document, its current revision's smallest and largest chunk id and how many chunks
-- it has. Computed from chunk_by_revision (migration 4), that was an aggregate over each
-- document's chunks: a 10% scope of the 100k-chunk bench (1,000 documents of 10 chunks) spent
-- ~6 ms in it, a fifth of the search. Kept on the revision, it is one index-only read per
-- document (revision_chunk_range). Nothing here depends on migration 7.
ALTER TABLE revision
    ADD COLUMN first_chunk_id bigint,
    ADD COLUMN last_chunk_id bigint,
    ADD COLUMN chunk_count integer NOT NULL DEFAULT 0;

UPDATE revision AS r
SET first_chunk_id = c.lo, last_chunk_id = c.hi, chunk_count = c.n
FROM (SELECT revision_id, min(id) AS lo, max(id) AS hi, count(*) AS n
      FROM chunk GROUP BY revision_id) AS c
WHERE c.revision_id = r.id;

CREATE INDEX revision_chunk_range ON revision (id)
    INCLUDE (first_chunk_id, last_chunk_id, chunk_count);

-- Kept by triggers, so no writer can forget: after any statement that adds or removes chunks
-- (ingest writes a staged revision's chunks in parts, and deletes them in parts), the touched
-- revisions' ranges are counted again from their chunks (index-only, chunk_by_revision). In
-- revision id order: concurrent writers lock revision rows in one order (no deadlock).
CREATE FUNCTION revision_chunk_range_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE revision AS r
    SET first_chunk_id = c.lo, last_chunk_id = c.hi, chunk_count = c.n
    FROM (SELECT t.revision_id, min(k.id) AS lo, max(k.id) AS hi, count(k.id) AS n
          FROM (SELECT DISTINCT revision_id FROM touched) AS t
          LEFT JOIN chunk AS k ON k.revision_id = t.revision_id
          GROUP BY t.revision_id
          ORDER BY t.revision_id) AS c
    WHERE r.id = c.revision_id;
    RETURN NULL;
END $$;

CREATE TRIGGER revision_chunk_range_on_insert AFTER INSERT ON chunk
REFERENCING NEW TABLE AS touched FOR EACH STATEMENT EXECUTE FUNCTION revision_chunk_range_update();
CREATE TRIGGER revision_chunk_range_on_delete AFTER DELETE ON chunk
REFERENCING OLD TABLE AS touched FOR EACH STATEMENT EXECUTE FUNCTION revision_chunk_range_update();
