-- Migration 3 (PostgreSQL): the keyword index at millions of chunks (docs/scale-out.md).
--
-- 1. keyword_token: per (token, store), how many indexed chunks contain the token: bm25's n
--    over a caller's readable set is a sum over its stores, read from a few rows, instead of a
--    count of the token's postings per search (a common word has hundreds of thousands of them
--    at 1M chunks). Kept by statement triggers on chunk_term, like keyword_total, so no writer
--    can forget it.
-- 2. chunk_term.impact: each posting's bm25 term frequency part, f * (k1 + 1) / (f + k1 * (1 - b
--    + b * D / avgdl)), with the average length of its store when it was written. A search
--    never scores with it (scores are computed from f and D with the caller's statistics); it
--    only orders a token's postings, best first, so a large unscoped search can take each
--    token's best postings as candidates (kbmcp/store/postgres/ranking.py) and score them
--    exactly.
-- 3. The postings' indexes: chunk_term_by_impact, (token, store, impact) with what scoring
--    reads INCLUDEd, serves every read by token (all of a token's postings in some stores, or
--    the best of them) as an index-only scan; the primary key (chunk_id, token) serves every
--    read by chunk (a small scope's postings of the query's tokens, a phrase's next token,
--    removing a chunk). Before, the primary key led with the token and a plain index served
--    the chunk.

CREATE TABLE keyword_token (
    token             text NOT NULL,
    knowledge_base_id bigint NOT NULL REFERENCES knowledge_base(id) ON DELETE CASCADE,
    rows              bigint NOT NULL,
    PRIMARY KEY (token, knowledge_base_id)
);

INSERT INTO keyword_token (token, knowledge_base_id, rows)
SELECT token, knowledge_base_id, count(*)
FROM chunk_term
GROUP BY token, knowledge_base_id;

-- Sorted by (token, store), additions and removals alike (a removal adds a negative count):
-- concurrent writers lock the rows they share in one order, so they wait, never deadlock.
-- Writers of one store already wait for each other at its keyword_total row.
CREATE FUNCTION keyword_token_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_token AS k (token, knowledge_base_id, rows)
    SELECT a.token, a.knowledge_base_id, count(*)
    FROM added AS a
    GROUP BY a.token, a.knowledge_base_id
    ORDER BY a.token, a.knowledge_base_id
    ON CONFLICT (token, knowledge_base_id) DO UPDATE SET rows = k.rows + excluded.rows;
    RETURN NULL;
END $$;

CREATE FUNCTION keyword_token_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_token AS k (token, knowledge_base_id, rows)
    SELECT r.token, r.knowledge_base_id, -count(*)
    FROM removed AS r
    GROUP BY r.token, r.knowledge_base_id
    ORDER BY r.token, r.knowledge_base_id
    ON CONFLICT (token, knowledge_base_id) DO UPDATE SET rows = k.rows + excluded.rows;
    -- A token no longer in the store: its row goes (this transaction holds its lock).
    DELETE FROM keyword_token AS k
    USING (SELECT DISTINCT token, knowledge_base_id FROM removed) AS r
    WHERE k.token = r.token AND k.knowledge_base_id = r.knowledge_base_id AND k.rows = 0;
    RETURN NULL;
END $$;

-- Statement triggers: one upsert per statement (a COPY of a whole batch of postings, or the
-- cascade from chunk_keyword, which PostgreSQL runs as one DELETE per removed chunk).
CREATE TRIGGER keyword_token_on_insert AFTER INSERT ON chunk_term
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION keyword_token_add();
CREATE TRIGGER keyword_token_on_delete AFTER DELETE ON chunk_term
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION keyword_token_remove();

-- The old indexes go first: the UPDATE below then writes no index entries, and each new index
-- is built once, sorted.
ALTER TABLE chunk_term DROP CONSTRAINT chunk_term_pkey;
DROP INDEX chunk_term_by_chunk;

-- The impact of the postings written before this migration, with their store's average length
-- now (k1 = 1.2, b = 0.75 and column weights 1, kbmcp/search/lexical/bm25.py and fts.py: an
-- order, not a score, so a later change of those constants costs candidates' order, not
-- correctness). Trap: the UPDATE leaves a dead copy of every row, which the indexes built in
-- this same transaction must still hold; a database with many postings before this migration
-- gets them back with `VACUUM FULL chunk_term` (docs/scale-out.md).
ALTER TABLE chunk_term ADD COLUMN impact real;
UPDATE chunk_term AS p
SET impact = (p.in_title + p.in_heading + p.in_body) * 2.2
             / ((p.in_title + p.in_heading + p.in_body)
                + 1.2 * (0.25 + 0.75 * p.length / greatest(t.tokens::float8 / t.rows, 1.0)))
FROM keyword_total AS t
WHERE t.knowledge_base_id = p.knowledge_base_id AND t.rows > 0;
UPDATE chunk_term SET impact = 0 WHERE impact IS NULL;
ALTER TABLE chunk_term ALTER COLUMN impact SET NOT NULL;

ALTER TABLE chunk_term ADD PRIMARY KEY (chunk_id, token);
CREATE INDEX chunk_term_by_impact ON chunk_term (token, knowledge_base_id, impact DESC)
    INCLUDE (chunk_id, length, in_title, in_heading, in_body);
