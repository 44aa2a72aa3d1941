"""The admin concern (kbmcp/store/admin.py) on PostgreSQL: the server and pgvector versions,
whether the HNSW index exists, and the counts of `kbmcp doctor` (the shared statements of
kbmcp/store/admin.py; a file's journal mode has no meaning on a server)."""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.store.admin import DatabaseFacts, count_by_store, count_rows
from kbmcp.store.postgres import citus
from kbmcp.store.postgres.migrations import current_version, latest_version
from kbmcp.store.postgres.vectors import has_index

PgConnection = psycopg.Connection[Any]

# `server_version` is the release ("18.1"), with a distribution's suffix on some builds.
SELECT_VERSIONS = """
SELECT current_setting('server_version'),
       (SELECT extversion FROM pg_extension WHERE extname = 'vector')
"""


def database_facts(conn: PgConnection) -> DatabaseFacts:
    server, pgvector = conn.execute(SELECT_VERSIONS).fetchone()
    storage: dict[str, Any] = {"hnsw_index": has_index(conn)}
    version = citus.citus_version(conn)
    if version is not None:  # a Citus coordinator: its nodes and what each holds
        storage["citus"] = {"version": version, "nodes": citus.nodes(conn)}
    return DatabaseFacts(
        software={"postgresql": server, "pgvector": pgvector, "psycopg": psycopg.__version__},
        schema_version=current_version(conn),
        schema_latest=latest_version(),
        storage=storage,
    )


counts = count_rows
counts_by_store = count_by_store
