-- Migration 9 (PostgreSQL): every row of a store's data names its store, and every key between
-- those rows includes it, so the tables can be distributed by knowledge_base_id on Citus
-- (docs/scale-out.md, "Sharding on Citus"; kbmcp/store/postgres/citus.py does it when the
-- database has the citus extension). Ids are unchanged; plain PostgreSQL runs this schema too.
--
-- 1. revision, chunk, chunk_vector, source_file and staged_revision get their document's
--    knowledge_base_id (a document never moves to another store, so the copy cannot go stale;
--    migration 5 did the same for document_tag and document_metadata).
-- 2. Primary keys and unique constraints include the store: (id) becomes (id,
--    knowledge_base_id), (public_id) becomes (public_id, knowledge_base_id), and so on. The
--    store comes second: every lookup by id or public id alone (a client's `doc_...` id, a
--    revision being written) is still one range of the same index, and Citus only asks that
--    the distribution column be in the key, not first. Public ids stay unique across stores by
--    construction (keyed hashes of their store's public id, kbmcp/ids.py), ids by their
--    sequence.
-- 3. The foreign keys between these tables name the store on both sides, so a row can only
--    refer to a row of its own store (Citus: a foreign key between distributed tables must
--    include the distribution column).
-- 4. The keyword triggers aggregate their transition table into arrays first and write from
--    those: on Citus a statement that reads a transition table and writes a distributed table
--    is planned as a distributed INSERT ... SELECT, which cannot see the transition table
--    ("could not find named tuplestore"); from arrays it is routed row by row. Their UPDATE
--    and DELETE name one store each (a loop over the statement's stores, nearly always one):
--    a trigger runs on a shard, where Citus runs a statement only when it is routed to one
--    shard ("cannot execute a distributed query from a query on a shard"). Same rows, same
--    lock order, on plain PostgreSQL too.
-- 5. Each revision's chunk range (migration 8) is kept the same way: its trigger gathers the
--    touched revisions store by store and updates each store's with one statement naming it,
--    reading the chunks by (revision_id, knowledge_base_id) (chunk_by_revision, below); the
--    range index names the store too, so a scope's join to it stays index-only.
--
-- On a large database the UPDATEs below rewrite revision, chunk and chunk_vector once (VACUUM
-- them afterwards) and the keys and indexes are rebuilt inside this transaction: raise
-- maintenance_work_mem first (docs/scale-out.md, "Settings of the database server").

ALTER TABLE revision ADD COLUMN knowledge_base_id bigint;
UPDATE revision AS r SET knowledge_base_id = d.knowledge_base_id
FROM document AS d WHERE d.id = r.document_id;
ALTER TABLE revision ALTER COLUMN knowledge_base_id SET NOT NULL;

ALTER TABLE chunk ADD COLUMN knowledge_base_id bigint;
UPDATE chunk AS c SET knowledge_base_id = r.knowledge_base_id
FROM revision AS r WHERE r.id = c.revision_id;
ALTER TABLE chunk ALTER COLUMN knowledge_base_id SET NOT NULL;

ALTER TABLE chunk_vector ADD COLUMN knowledge_base_id bigint;
UPDATE chunk_vector AS v SET knowledge_base_id = c.knowledge_base_id
FROM chunk AS c WHERE c.id = v.chunk_id;
ALTER TABLE chunk_vector ALTER COLUMN knowledge_base_id SET NOT NULL;

ALTER TABLE source_file ADD COLUMN knowledge_base_id bigint;
UPDATE source_file AS f SET knowledge_base_id = d.knowledge_base_id
FROM document AS d WHERE d.id = f.document_id;
ALTER TABLE source_file ALTER COLUMN knowledge_base_id SET NOT NULL;

ALTER TABLE staged_revision ADD COLUMN knowledge_base_id bigint;
UPDATE staged_revision AS s SET knowledge_base_id = d.knowledge_base_id
FROM document AS d WHERE d.id = s.document_id;
ALTER TABLE staged_revision ALTER COLUMN knowledge_base_id SET NOT NULL;

-- The foreign keys between store tables go first (they depend on the keys replaced below).
ALTER TABLE document DROP CONSTRAINT document_current_revision;
ALTER TABLE document_tag DROP CONSTRAINT document_tag_document_id_fkey;
ALTER TABLE document_metadata DROP CONSTRAINT document_metadata_document_id_fkey;
ALTER TABLE revision DROP CONSTRAINT revision_document_id_fkey;
ALTER TABLE chunk DROP CONSTRAINT chunk_revision_id_fkey;
ALTER TABLE chunk_vector DROP CONSTRAINT chunk_vector_chunk_id_fkey;
ALTER TABLE chunk_vec DROP CONSTRAINT chunk_vec_chunk_id_fkey;
ALTER TABLE chunk_keyword DROP CONSTRAINT chunk_keyword_chunk_id_fkey;
ALTER TABLE chunk_term DROP CONSTRAINT chunk_term_chunk_id_fkey;
ALTER TABLE source_file DROP CONSTRAINT source_file_document_id_fkey;
ALTER TABLE staged_revision DROP CONSTRAINT staged_revision_document_id_fkey;
ALTER TABLE staged_revision DROP CONSTRAINT staged_revision_revision_id_fkey;

ALTER TABLE document DROP CONSTRAINT document_pkey,
    DROP CONSTRAINT document_public_id_key,
    ADD PRIMARY KEY (id, knowledge_base_id),
    ADD UNIQUE (public_id, knowledge_base_id);
ALTER TABLE revision DROP CONSTRAINT revision_pkey,
    DROP CONSTRAINT revision_public_id_key,
    DROP CONSTRAINT revision_document_id_number_key,
    ADD PRIMARY KEY (id, knowledge_base_id),
    ADD UNIQUE (public_id, knowledge_base_id),
    ADD UNIQUE (document_id, number, knowledge_base_id);
ALTER TABLE chunk DROP CONSTRAINT chunk_pkey,
    DROP CONSTRAINT chunk_public_id_key,
    DROP CONSTRAINT chunk_revision_id_ordinal_key,
    ADD PRIMARY KEY (id, knowledge_base_id),
    ADD UNIQUE (public_id, knowledge_base_id),
    ADD UNIQUE (revision_id, ordinal, knowledge_base_id);
ALTER TABLE document_tag DROP CONSTRAINT document_tag_pkey,
    ADD PRIMARY KEY (document_id, key, value, knowledge_base_id);
ALTER TABLE document_metadata DROP CONSTRAINT document_metadata_pkey,
    ADD PRIMARY KEY (document_id, key, knowledge_base_id);
ALTER TABLE chunk_vector DROP CONSTRAINT chunk_vector_pkey,
    ADD PRIMARY KEY (chunk_id, knowledge_base_id);
ALTER TABLE chunk_vec DROP CONSTRAINT chunk_vec_pkey,
    ADD PRIMARY KEY (chunk_id, knowledge_base_id);
ALTER TABLE chunk_keyword DROP CONSTRAINT chunk_keyword_pkey,
    ADD PRIMARY KEY (chunk_id, knowledge_base_id);
ALTER TABLE chunk_term DROP CONSTRAINT chunk_term_pkey,
    ADD PRIMARY KEY (chunk_id, token, knowledge_base_id);
ALTER TABLE source_file DROP CONSTRAINT source_file_pkey,
    ADD PRIMARY KEY (document_id, knowledge_base_id);
ALTER TABLE staged_revision DROP CONSTRAINT staged_revision_pkey,
    ADD PRIMARY KEY (revision_id, knowledge_base_id);

-- DEFERRABLE: a document and its first revision refer to each other (see migration 1).
ALTER TABLE document ADD CONSTRAINT document_current_revision
    FOREIGN KEY (current_revision_id, knowledge_base_id) REFERENCES revision (id, knowledge_base_id)
    DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE document_tag ADD FOREIGN KEY (document_id, knowledge_base_id)
    REFERENCES document (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE document_metadata ADD FOREIGN KEY (document_id, knowledge_base_id)
    REFERENCES document (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE revision ADD FOREIGN KEY (document_id, knowledge_base_id)
    REFERENCES document (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE chunk ADD FOREIGN KEY (revision_id, knowledge_base_id)
    REFERENCES revision (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE chunk_vector ADD FOREIGN KEY (chunk_id, knowledge_base_id)
    REFERENCES chunk (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE chunk_vec ADD FOREIGN KEY (chunk_id, knowledge_base_id)
    REFERENCES chunk (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE chunk_keyword ADD FOREIGN KEY (chunk_id, knowledge_base_id)
    REFERENCES chunk (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE chunk_term ADD FOREIGN KEY (chunk_id, knowledge_base_id)
    REFERENCES chunk_keyword (chunk_id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE source_file ADD FOREIGN KEY (document_id, knowledge_base_id)
    REFERENCES document (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE staged_revision ADD FOREIGN KEY (revision_id, knowledge_base_id)
    REFERENCES revision (id, knowledge_base_id) ON DELETE CASCADE;
ALTER TABLE staged_revision ADD FOREIGN KEY (document_id, knowledge_base_id)
    REFERENCES document (id, knowledge_base_id) ON DELETE CASCADE;

-- A scope's runs (kbmcp/store/postgres/scope.py) and a run's postings (ranking.py,
-- TOKENS_IN_RANGES) now say which store they read: the store is in these indexes, so both stay
-- index-only (in chunk_by_revision's key: the conditions on it are then index conditions, not
-- a filter evaluated for every chunk of the scope).
DROP INDEX chunk_by_revision;
CREATE INDEX chunk_by_revision ON chunk (revision_id, knowledge_base_id) INCLUDE (id);
DROP INDEX chunk_term_by_chunk_id;
CREATE INDEX chunk_term_by_chunk_id ON chunk_term (token, chunk_id)
    INCLUDE (length, in_title, in_heading, in_body, knowledge_base_id);

CREATE OR REPLACE VIEW indexed_chunk AS
SELECT c.id AS chunk_id,
       c.public_id AS chunk_public_id,
       c.revision_id,
       d.id AS document_id,
       d.knowledge_base_id
FROM document AS d
JOIN chunk AS c
  ON c.knowledge_base_id = d.knowledge_base_id AND c.revision_id = d.current_revision_id
WHERE d.status = 'published';

CREATE OR REPLACE FUNCTION document_metadata_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.metadata::text IS NOT DISTINCT FROM OLD.metadata::text THEN
            RETURN NULL;
        END IF;
        DELETE FROM document_metadata
        WHERE document_id = NEW.id AND knowledge_base_id = NEW.knowledge_base_id;
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

-- The keyword triggers (migrations 1 and 3) from arrays (point 4 above). Sorted by store, or by
-- (token, store): concurrent writers lock the rows they share in one order, so they wait,
-- never deadlock.
CREATE OR REPLACE FUNCTION keyword_total_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stores bigint[];
    counts bigint[];
    lengths bigint[];
BEGIN
    SELECT array_agg(g.store ORDER BY g.store), array_agg(g.rows ORDER BY g.store),
           array_agg(g.tokens ORDER BY g.store)
    INTO stores, counts, lengths
    FROM (SELECT n.knowledge_base_id AS store, count(*) AS rows,
                 sum(n.title_tokens + n.heading_tokens + n.body_tokens) AS tokens
          FROM added AS n GROUP BY n.knowledge_base_id) AS g;
    INSERT INTO keyword_total AS t (knowledge_base_id, rows, tokens)
    SELECT * FROM unnest(stores, counts, lengths)
    ON CONFLICT (knowledge_base_id) DO UPDATE
    SET rows = t.rows + excluded.rows, tokens = t.tokens + excluded.tokens;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION keyword_total_remove() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    stores bigint[];
    counts bigint[];
    lengths bigint[];
BEGIN
    SELECT array_agg(g.store ORDER BY g.store), array_agg(g.rows ORDER BY g.store),
           array_agg(g.tokens ORDER BY g.store)
    INTO stores, counts, lengths
    FROM (SELECT o.knowledge_base_id AS store, count(*) AS rows,
                 sum(o.title_tokens + o.heading_tokens + o.body_tokens) AS tokens
          FROM removed AS o GROUP BY o.knowledge_base_id) AS g;
    FOR i IN 1 .. coalesce(array_length(stores, 1), 0) LOOP
        UPDATE keyword_total
        SET rows = rows - counts[i], tokens = tokens - lengths[i]
        WHERE knowledge_base_id = stores[i];
    END LOOP;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION keyword_token_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tokens text[];
    stores bigint[];
    counts bigint[];
BEGIN
    SELECT array_agg(g.token ORDER BY g.token, g.store), array_agg(g.store ORDER BY g.token, g.store),
           array_agg(g.rows ORDER BY g.token, g.store)
    INTO tokens, stores, counts
    FROM (SELECT a.token, a.knowledge_base_id AS store, count(*) AS rows
          FROM added AS a GROUP BY a.token, a.knowledge_base_id) AS g;
    INSERT INTO keyword_token AS k (token, knowledge_base_id, rows)
    SELECT * FROM unnest(tokens, stores, counts)
    ON CONFLICT (token, knowledge_base_id) DO UPDATE SET rows = k.rows + excluded.rows;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION keyword_token_remove() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    store bigint;
    store_tokens text[];
    tokens text[];
    stores bigint[];
    counts bigint[];
BEGIN
    SELECT array_agg(g.token ORDER BY g.token, g.store), array_agg(g.store ORDER BY g.token, g.store),
           array_agg(-g.rows ORDER BY g.token, g.store)
    INTO tokens, stores, counts
    FROM (SELECT r.token, r.knowledge_base_id AS store, count(*) AS rows
          FROM removed AS r GROUP BY r.token, r.knowledge_base_id) AS g;
    INSERT INTO keyword_token AS k (token, knowledge_base_id, rows)
    SELECT * FROM unnest(tokens, stores, counts)
    ON CONFLICT (token, knowledge_base_id) DO UPDATE SET rows = k.rows + excluded.rows;
    -- A token no longer in the store: its row goes (this transaction holds its lock).
    FOR store IN SELECT DISTINCT s FROM unnest(stores) AS s ORDER BY s LOOP
        store_tokens := ARRAY(SELECT r.t FROM unnest(tokens, stores) AS r(t, s)
                              WHERE r.s = store);
        DELETE FROM keyword_token
        WHERE knowledge_base_id = store AND rows = 0 AND token = ANY(store_tokens);
    END LOOP;
    RETURN NULL;
END $$;

-- The chunk-range trigger of migration 8, store by store (point 5 above). In (store, revision
-- id) order: concurrent writers lock revision rows in one order (no deadlock).
DROP INDEX revision_chunk_range;
CREATE INDEX revision_chunk_range ON revision (id, knowledge_base_id)
    INCLUDE (first_chunk_id, last_chunk_id, chunk_count);

CREATE OR REPLACE FUNCTION revision_chunk_range_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    store bigint;
    revisions bigint[];
BEGIN
    FOR store, revisions IN
        SELECT t.knowledge_base_id, array_agg(DISTINCT t.revision_id ORDER BY t.revision_id)
        FROM touched AS t
        GROUP BY t.knowledge_base_id
        ORDER BY t.knowledge_base_id
    LOOP
        UPDATE revision AS r
        SET first_chunk_id = c.lo, last_chunk_id = c.hi, chunk_count = c.n
        FROM (SELECT t.revision_id, min(k.id) AS lo, max(k.id) AS hi, count(k.id) AS n
              FROM unnest(revisions) AS t(revision_id)
              LEFT JOIN chunk AS k
                ON k.knowledge_base_id = store AND k.revision_id = t.revision_id
              GROUP BY t.revision_id
              ORDER BY t.revision_id) AS c
        WHERE r.knowledge_base_id = store AND r.id = c.revision_id;
    END LOOP;
    RETURN NULL;
END $$;
