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
    from kbmcp.store.backend import Connection

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
