"""The admin concern (kbmcp/store/admin.py) on SQLite: the library versions, the journal mode and
the counts of `kbmcp doctor`."""

from __future__ import annotations

import apsw

from kbmcp.store.admin import DatabaseFacts
from kbmcp.store.sqlite.migrations import current_version, latest_version

# Documents and memories share tables (migration 6): each count names its kind.
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
JOURNAL_MODE = "PRAGMA journal_mode"


def database_facts(conn: apsw.Connection) -> DatabaseFacts:
    return DatabaseFacts(
        software={
            "sqlite": apsw.sqlite_lib_version(),
            "apsw": apsw.apsw_version(),
            "sqlite_vec": _package_version("sqlite-vec"),
        },
        schema_version=current_version(conn),
        schema_latest=latest_version(),
        storage={"journal_mode": conn.execute(JOURNAL_MODE).fetchone()[0]},
    )


def counts(conn: apsw.Connection) -> dict[str, int]:
    return {name: conn.execute(query).fetchone()[0] for name, query in COUNTS.items()}


def _package_version(name: str) -> str | None:
    from importlib import metadata  # (not loaded by commands that never run the doctor)

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
