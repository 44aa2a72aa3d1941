-- Migration 11 (PostgreSQL): kbmcp's trigger functions plan their statements at each call.
--
-- PL/pgSQL keeps a statement's plan for the rest of the session: after five calls it may keep
-- one generic plan, made with the tables' sizes of that moment. A `kbmcp add` into a new
-- database is one session whose tables start empty, so revision_chunk_range_update's read of
-- a revision's chunks was planned as a scan of the (then tiny) chunk table and stayed one as the
-- table grew: every chunk written (ingest inserts them one statement each) cost a scan of all
-- chunks, a quadratic ingest. 2,000 files (10,783 chunks) took 65 s, the chunk inserts 10.3 ms
-- a file; planned at each call (~0.2 ms a plan), 49 s and 2.0 ms (bench/ingest.py --postgres).
-- Every trigger function reads or updates rows of a table that grows with the data, so all
-- of them are planned at each call, not only the one measured.
ALTER FUNCTION document_metadata_sync() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION keyword_total_add() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION keyword_total_remove() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION keyword_token_add() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION keyword_token_remove() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION revision_chunk_range_update() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION document_chunk_range_copy() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION document_chunk_range_follow() SET plan_cache_mode = force_custom_plan;
