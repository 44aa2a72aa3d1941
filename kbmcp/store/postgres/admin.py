"""The admin concern (kbmcp/store/admin.py) on PostgreSQL: the server and pgvector versions,
whether the HNSW index exists, and the counts of `kbmcp doctor` (SQLite's statements; a file's
journal mode has no meaning on a server)."""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.store.admin import DatabaseFacts
from kbmcp.store.postgres.migrations import current_version, latest_version
from kbmcp.store.postgres.vectors import has_index

PgConnection = psycopg.Connection[Any]

# Documents and memories share tables: each count names its kind (as on SQLite).
OF_KIND = """
SELECT count(*) FROM document AS d JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.kind = '{kind}' AND d.status = '{status}'
"""
COUNTS = {
    "knowledge_bases": "SELECT count(*) FROM knowledge_base WHERE kind = 'documents'",
    "documents": OF_KIND.format(kind="documents", status="published"),
    "archived_documents": OF_KIND.format(kind="documents", status="archived"),
    "memory_stores": "SELECT count(*) FROM knowledge_base WHERE kind = 'memories'",
    "memories": OF_KIND.format(kind="memories", status="published"),
    "forgotten_memories": OF_KIND.format(kind="memories", status="archived"),
    "revisions": "SELECT count(*) FROM revision",
    "indexed_chunks": "SELECT count(*) FROM indexed_chunk",
}
# `server_version` is the release ("18.1"), with a distribution's suffix on some builds.
SELECT_VERSIONS = """
SELECT current_setting('server_version'),
       (SELECT extversion FROM pg_extension WHERE extname = 'vector')
"""


def database_facts(conn: PgConnection) -> DatabaseFacts:
    server, pgvector = conn.execute(SELECT_VERSIONS).fetchone()
    return DatabaseFacts(
        software={"postgresql": server, "pgvector": pgvector, "psycopg": psycopg.__version__},
        schema_version=current_version(conn),
        schema_latest=latest_version(),
        storage={"hnsw_index": has_index(conn)},
    )


def counts(conn: PgConnection) -> dict[str, int]:
    return {name: int(conn.execute(query).fetchone()[0]) for name, query in COUNTS.items()}
