-- Migration 4 (PostgreSQL): a scope's postings as ranges of chunk ids (docs/scale-out.md).
--
-- A filtered search reads each query token's postings inside its scope. chunk_term_by_impact
-- (token, store, impact) holds a token's postings in impact order, so a scope's share of them
-- was found by reading all of the token's postings in the store and joining them to the scope
-- (at 100k chunks, a 10% scope read ten times the postings it kept). A scope is a few runs of
-- consecutive chunk ids (a document's chunks are written together); with this index each
-- token's postings in each run are one index-only range (kbmcp/store/postgres/ranking.py,
-- "scope_ranges"). INCLUDE: what scoring reads, as in chunk_term_by_impact.
CREATE INDEX chunk_term_by_chunk_id ON chunk_term (token, chunk_id)
    INCLUDE (length, in_title, in_heading, in_body);

-- A scope's documents -> their current revisions' chunk ids, as runs: each revision's smallest
-- and largest chunk id and count, index-only (kbmcp/store/postgres/scope.py, SCOPE_RUNS).
CREATE INDEX chunk_by_revision ON chunk (revision_id) INCLUDE (id);
