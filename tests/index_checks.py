"""Checking that a knowledge-base file is consistent: SQLite's and FTS5's integrity checks, and
every document fully indexed at its current revision (chunks, keyword index, vectors agree).
Used after killed ingests (tests/test_crash_safety.py) and on backups (tests/test_backup.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kbmcp.store.sqlite.connection import open_connection

INDEXED_CHUNKS = """
SELECT c.id FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
WHERE d.status = 'published'
"""
CURRENT_REVISIONS = """
SELECT d.path, d.status, r.id, r.content, r.content_hash
FROM document AS d JOIN revision AS r ON r.id = d.current_revision_id
"""


def indexed_state(db: Path) -> dict[str, tuple[str, str]]:
    """path -> (status, content) after checking every invariant of a consistent file."""
    conn = open_connection(db, create=False)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO chunk_fts (chunk_fts) VALUES ('integrity-check')")
        indexed = {row[0] for row in conn.execute(INDEXED_CHUNKS)}
        fts = {row[0] for row in conn.execute("SELECT id FROM chunk_fts_docsize")}
        vec = {row[0] for row in conn.execute("SELECT rowid FROM chunk_vec")}
        stored = {row[0] for row in conn.execute("SELECT chunk_id FROM chunk_vector")}
        assert fts == indexed, "keyword index and current chunks disagree"
        assert vec == indexed, "vec0 index and current chunks disagree"
        assert indexed <= stored, "an indexed chunk has no stored vector"
        state = {}
        for path, status, revision_id, content, content_hash in conn.execute(CURRENT_REVISIONS):
            assert hashlib.sha256(content.encode()).hexdigest() == content_hash
            chunks = conn.execute(
                "SELECT ordinal, char_start, char_end, text FROM chunk WHERE revision_id = ? "
                "ORDER BY ordinal",
                (revision_id,),
            ).fetchall()
            assert [c[0] for c in chunks] == list(range(len(chunks))) and chunks, path
            assert all(content[start:end] == text for _, start, end, text in chunks), path
            state[path] = (status, content)
        return state
    finally:
        conn.close()
