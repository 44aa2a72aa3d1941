"""Each revision's first and last chunk id and chunk count on PostgreSQL
(sql/008_revision_chunk_range.sql), and each document's copy of its current revision's
(sql/010_document_chunk_range.sql): what a scope reads instead of aggregating each document's
chunks. They must always equal the chunks' own: filled by the migrations for existing rows,
kept by triggers through every write (ingest, re-ingest, chunks deleted, a revision deleted, a
document pointed at another revision)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import psycopg
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.store.postgres import migrations
from kbmcp.store.postgres.connection import connect
from kbmcp.workspace import Workspace
from tests.postgres_fixtures import module_database
from tests.search_corpus import ingest
from tests.test_postgres_scope_runs import _documents

# Each revision's recorded range beside its chunks' own.
RANGES = """
SELECT r.id, r.first_chunk_id, r.last_chunk_id, r.chunk_count, min(c.id), max(c.id), count(c.id)
FROM revision AS r
LEFT JOIN chunk AS c ON c.knowledge_base_id = r.knowledge_base_id AND c.revision_id = r.id
GROUP BY r.id, r.knowledge_base_id ORDER BY r.id
"""
# Each document's recorded range beside its current revision's chunks' own.
DOCUMENT_RANGES = """
SELECT d.id, d.current_first_chunk_id, d.current_last_chunk_id, d.current_chunk_count,
       min(c.id), max(c.id), count(c.id)
FROM document AS d
LEFT JOIN chunk AS c
       ON c.knowledge_base_id = d.knowledge_base_id AND c.revision_id = d.current_revision_id
GROUP BY d.id, d.knowledge_base_id ORDER BY d.id
"""
RANGE_MIGRATION = 8


def _mismatches(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Revisions and documents whose recorded range is not their chunks' own."""
    found = []
    for statement in (RANGES, DOCUMENT_RANGES):
        rows = conn.execute(statement).fetchall()
        assert rows
        found += [row for row in rows if (row[1], row[2], row[3]) != (row[4], row[5], row[6])]
    return found


def test_the_migration_fills_existing_revisions(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url, migrate=False)
    try:
        migrations.migrate(conn, target=RANGE_MIGRATION - 1)
        with conn.transaction():
            # interleaved and consecutive chunks, written before migration 8
            _documents(conn, store_keys=False)
        migrations.migrate(conn)
        assert _mismatches(conn) == []
        ranges = {row[0]: row[1:4] for row in conn.execute(RANGES)}
        assert ranges[1] == (1, 19, 10) and ranges[3] == (21, 25, 5)
    finally:
        conn.close()


def test_triggers_follow_inserts_and_deletes(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url)
    try:
        with conn.transaction():
            _documents(conn)
        assert _mismatches(conn) == []
        conn.execute("DELETE FROM chunk WHERE id IN (1, 19, 22)")  # ends and a middle
        conn.execute("DELETE FROM chunk WHERE revision_id = 4")  # every chunk of one
        assert _mismatches(conn) == []
        four = conn.execute("SELECT first_chunk_id, last_chunk_id, chunk_count FROM revision "
                            "WHERE id = 4").fetchone()  # fmt: skip
        assert four == (None, None, 0)
        conn.execute("DELETE FROM document WHERE id = 2")  # its revision and chunks by cascade
        assert _mismatches(conn) == []
        # a document pointed at another revision (of its store) takes that one's range (chunk
        # 22 of revision 3 was deleted above), and at none, no range
        conn.execute("UPDATE document SET current_revision_id = 3 WHERE id = 4")
        assert conn.execute(
            "SELECT current_first_chunk_id, current_last_chunk_id, "
            "current_chunk_count FROM document WHERE id = 4"
        ).fetchone() == (21, 25, 4)
        conn.execute("UPDATE document SET current_revision_id = NULL WHERE id = 1")
        assert conn.execute("SELECT current_first_chunk_id, current_chunk_count FROM document "
                            "WHERE id = 1").fetchone() == (None, 0)  # fmt: skip
        assert _mismatches(conn) == []
    finally:
        conn.close()


def test_ingest_and_reingest_keep_them(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Real writes: ingest (a staged revision's chunks written in parts), then documents
    rewritten (new revisions, old chunks deleted) and some removed from the folder."""
    postgres_url = module_database(request, "ingest")
    rng = random.Random(2)
    words = ["alpha", "beta", "gamma", "delta", "vector", "index", "scope", "token", "rotate",
             "keys", "backup"]  # fmt: skip
    folder = tmp_path / "docs"
    folder.mkdir()

    def write(count: int) -> None:
        for i in range(count):
            paragraphs = [" ".join(rng.choices(words, k=rng.randint(20, 200))) for _ in range(6)]
            (folder / f"d{i:02d}.md").write_text("# Doc\n\n" + "\n\n".join(paragraphs) + "\n")

    ws = Workspace(Settings(db=postgres_url, embedder="hash"), embedder=HashingEmbedder())
    try:
        write(12)
        ingest(ws, folder)
        write(5)  # five documents rewritten
        (folder / "d11.md").unlink()
        ingest(ws, folder)
        assert _mismatches(ws.conn) == []
        counts = [row[3] for row in ws.conn.execute(RANGES)]
        assert max(counts) > 1  # documents of several chunks
    finally:
        ws.close()
