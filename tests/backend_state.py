"""What a knowledge base holds, read the same way from an SQLite file and a PostgreSQL database,
so tests can assert that ingest on either backend gives the same rows and the same indexes.

Row ids are kbmcp's own (equal on both backends when the same writes run in the same order);
timestamps are left out (the clock moves between two runs). The keyword index is compared token
by token: FTS5's instances (fts5vocab) on SQLite, the postings' positions on PostgreSQL, each as
(chunk id, token, column, offset).
"""

from __future__ import annotations

from typing import Any

from kbmcp.workspace import Workspace

COLUMNS = ("title", "heading", "body")
POSITION_SHIFT = 20  # kbmcp/store/postgres/keyword.py: position = column << 20 | offset

CATALOG = {
    "document": """
        SELECT id, public_id, knowledge_base_id, path, title, kind, source, metadata, status,
               current_revision_id, attributes_hash
        FROM document""",
    "revision": """
        SELECT id, public_id, document_id, number, content, content_hash, char_count, line_count
        FROM revision""",
    "chunk": """
        SELECT id, public_id, revision_id, ordinal, heading_path, char_start, char_end,
               line_start, line_end, text
        FROM chunk""",
    "document_tag": "SELECT document_id, key, value, knowledge_base_id FROM document_tag",
    # (checked_ns: when a run took the signature, so it differs between two runs)
    "source_file": """
        SELECT document_id, size, mtime_ns, inode, bytes_hash, read_key, folder
        FROM source_file""",
    "staged_revision": "SELECT revision_id, document_id, chunking FROM staged_revision",
    "knowledge_base": "SELECT id, public_id, tenant_id, name, kind FROM knowledge_base",
}
# Two tenants' documents with tags and metadata, as a version before the store-scoped filters
# (SQLite migration 11, PostgreSQL migration 5) wrote them: the upgrade tests fill these in.
OLDER_TAGGED_ROWS = """
INSERT INTO tenant (id, public_id, name, created_at) VALUES (1, 'ten_a', 'alice', '2026'),
                                                            (2, 'ten_b', 'bob', '2026');
INSERT INTO knowledge_base (id, public_id, tenant_id, name, created_at, updated_at)
VALUES (10, 'kb_a', 1, 'a', '2026', '2026'), (20, 'kb_b', 2, 'b', '2026', '2026');
INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind, metadata, created_at,
                      updated_at)
VALUES (1, 'doc_1', 10, 'x.md', 'X', 'markdown', '{"team": "ops", "n": 2}', '2026', '2026'),
       (2, 'doc_2', 20, 'x.md', 'X', 'markdown', '{"team": "ops", "ok": true}', '2026', '2026');
INSERT INTO document_tag (document_id, key, value) VALUES (1, 't', 'x'), (2, 't', 'x'),
                                                          (2, 'u', 'y');
"""

SQLITE_KEYWORDS = """
SELECT v.doc, v.term, v.col, v."offset" FROM temp.kbmcp_test_vocab AS v
"""
SELECT_POSTGRES_INDEXED = "SELECT chunk_id, embedding FROM chunk_vec"
SELECT_POSTGRES_STORED = "SELECT chunk_id, embedding FROM chunk_vector"
POSTGRES_KEYWORDS = """
SELECT chunk_id, token, unnest(positions) FROM chunk_term
"""


def catalog_state(workspace: Workspace) -> dict[str, list[tuple[Any, ...]]]:
    """Every row ingest writes, without timestamps, sorted."""
    conn = workspace.conn
    return {
        table: sorted(tuple(row) for row in conn.execute(query)) for table, query in CATALOG.items()
    }


def index_state(workspace: Workspace) -> dict[str, Any]:
    """The search indexes: keyword instances, indexed vectors and stored vectors by chunk id."""
    conn = workspace.conn
    if workspace.store.kind == "sqlite":
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kbmcp_test_vocab "
            "USING fts5vocab(main, chunk_fts, instance)"
        )
        keywords = [tuple(row) for row in conn.execute(SQLITE_KEYWORDS)]
        indexed = dict(conn.execute("SELECT rowid, embedding FROM chunk_vec"))
        stored = dict(conn.execute("SELECT chunk_id, embedding FROM chunk_vector"))
        sizes = {row[0] for row in conn.execute("SELECT id FROM chunk_fts_docsize")}
    else:
        keywords = [
            (chunk_id, token, COLUMNS[position >> POSITION_SHIFT],
             position & ((1 << POSITION_SHIFT) - 1))
            for chunk_id, token, position in conn.execute(POSTGRES_KEYWORDS)
        ]  # fmt: skip
        with conn.cursor(binary=True) as cur:
            indexed = {
                i: bytes(v) for i, v in cur.execute("SELECT chunk_id, embedding FROM chunk_vec")
            }
            stored = {
                i: bytes(v) for i, v in cur.execute("SELECT chunk_id, embedding FROM chunk_vector")
            }
        sizes = {row[0] for row in conn.execute("SELECT chunk_id FROM chunk_keyword")}
    return {
        "keywords": sorted(keywords),
        "keyword_chunks": sorted(sizes),
        "indexed_vectors": dict(sorted(indexed.items())),
        "stored_vectors": dict(sorted(stored.items())),
    }


def indexed_chunk_ids(workspace: Workspace) -> list[int]:
    """The chunks that should be in the indexes: current chunks of published documents."""
    return sorted(row[0] for row in workspace.conn.execute("SELECT chunk_id FROM indexed_chunk"))
