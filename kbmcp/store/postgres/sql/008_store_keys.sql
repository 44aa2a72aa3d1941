-- Placeholder on branch wave4-bench: migration 8 is the Citus store keys of branch wave4-citus.
-- Migration numbers run 1..n without gaps (kbmcp/store/migrations.py), so this branch needs a
-- 7 and an 8 below its 9; when the branches are merged, take the other branch's file.
SELECT 1;
