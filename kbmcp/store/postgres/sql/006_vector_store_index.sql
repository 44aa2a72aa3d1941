-- Migration 6 (PostgreSQL): a caller's unfiltered search reads its own stores' vectors only.
--
-- A search of some stores without a filter, over too few chunks for the HNSW index (ranking.py,
-- EXACT_UNSCOPED_POOL: `knowledge_base_id = ANY(searched stores)`), had no index on the store:
-- it read every vector of the table and kept the searched stores' rows. A tenant with a few
-- hundred chunks in a database of 100,000 paid a scan of all of them on every search (87 ms
-- for the 100,000 rows of the bench database, 336 ms cold), and the search's time told it how
-- much the other tenants store. With this index the planner reads the searched stores' rows by
-- store (and still scans the table when they are most of it).
CREATE INDEX chunk_vec_by_store ON chunk_vec (knowledge_base_id, chunk_id);
