"""The admin concern of the store contract: what `kbmcp doctor` reports about the database
itself (kbmcp/service/admin.py): the versions of the libraries and the server it runs on, its
schema version, the facts of its storage, and how many rows of each kind it holds.

Implemented by kbmcp/store/sqlite/admin.py (the SQLite library, apsw and sqlite-vec; the
journal mode) and kbmcp/store/postgres/admin.py (the server, pgvector and psycopg; whether the
HNSW index exists). The counts are the same statements on both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection

# The counts `kbmcp doctor` reports, in its order (kbmcp/cli/doctor_lines.py words them).
COUNTED = (
    "knowledge_bases",
    "documents",
    "archived_documents",
    "memory_stores",
    "memories",
    "forgotten_memories",
    "revisions",
    "indexed_chunks",
)
# The statements behind them: plain SQL both backends run as written. Documents and memories
# share tables (SQLite migration 6): each count names its kind and status.
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


# Per knowledge base and memory store (GET /metrics): published documents (memories) and
# indexed chunks. Plain SQL both backends run as written; one grouped pass over each table
# instead of a subquery per store.
COUNTS_BY_STORE = """
SELECT kb.public_id, kb.name, kb.kind, t.name,
       coalesce(d.documents, 0), coalesce(c.chunks, 0)
FROM knowledge_base AS kb
JOIN tenant AS t ON t.id = kb.tenant_id
LEFT JOIN (SELECT knowledge_base_id, count(*) AS documents FROM document
           WHERE status = 'published' GROUP BY knowledge_base_id) AS d
       ON d.knowledge_base_id = kb.id
LEFT JOIN (SELECT knowledge_base_id, count(*) AS chunks FROM indexed_chunk
           GROUP BY knowledge_base_id) AS c
       ON c.knowledge_base_id = kb.id
ORDER BY kb.public_id
"""


@dataclass(frozen=True)
class StoreCounts:
    """One knowledge base or memory store and what it holds (GET /metrics)."""

    public_id: str
    name: str
    kind: str  # documents | memories
    tenant: str
    documents: int  # published documents, or memories not forgotten
    chunks: int  # indexed chunks


@dataclass(frozen=True)
class DatabaseFacts:
    """What the doctor reports beside the counts, as report entries (name -> value)."""

    # The database software: SQLite {"sqlite", "apsw", "sqlite_vec"}, PostgreSQL
    # {"postgresql", "pgvector", "psycopg"} (a version, or None when unknown).
    software: dict[str, str | None]
    schema_version: int
    schema_latest: int
    # How the data is kept: SQLite {"journal_mode"}, PostgreSQL {"hnsw_index": bool}.
    storage: dict[str, Any]


class Admin(Protocol):
    def database_facts(self, conn: Connection) -> DatabaseFacts:
        """The versions and storage facts of the database `conn` is connected to."""
        ...

    def counts(self, conn: Connection) -> dict[str, int]:
        """Rows of each kind, named as in COUNTED and in that order. Documents and memories
        share tables: each count names its kind and status."""
        ...

    def counts_by_store(self, conn: Connection) -> list[StoreCounts]:
        """Each knowledge base and memory store with its documents and indexed chunks."""
        ...


def count_rows(conn: Connection) -> dict[str, int]:
    """`Admin.counts` on either backend: COUNTS, in COUNTED's order."""
    return {name: int(conn.execute(COUNTS[name]).fetchone()[0]) for name in COUNTED}


def count_by_store(conn: Connection) -> list[StoreCounts]:
    """`Admin.counts_by_store` on either backend."""
    return [StoreCounts(*row) for row in conn.execute(COUNTS_BY_STORE)]
