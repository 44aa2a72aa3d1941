-- Migration 7: the file's id key. Public ids are HMAC-SHA256(key, what makes the row unique)
-- (kbmcp/ids.py), so they stay deterministic within the file while revealing nothing without
-- the key: no id can be computed from a name, and a memory's id cannot be matched against
-- guesses of its text. The key itself is written by kbmcp/store/id_key.py right after the
-- migrations, from Python's `secrets` (or, in tests only, KBMCP_TEST_ID_KEY).
--
-- Rows that exist when a file is upgraded keep their ids: ids are citations that agents and
-- people keep (and a token's allow-list names knowledge bases by id), so rewriting them would
-- break every one of them. Those old ids stay unkeyed hashes; `unkeyed_before` records that the
-- file has some (`kbmcp doctor` shows it). Everything made after the upgrade gets keyed ids.
CREATE TABLE id_key (
    id             INTEGER PRIMARY KEY CHECK (id = 1),  -- one row
    key            BLOB NOT NULL CHECK (length(key) = 32),
    origin         TEXT NOT NULL CHECK (origin IN ('random', 'pinned')),  -- pinned: tests only
    unkeyed_before INTEGER NOT NULL CHECK (unkeyed_before IN (0, 1)),
    created_at     TEXT NOT NULL
);
