"""The admin concern (kbmcp/store/admin.py) on SQLite: the library versions, the journal mode and
the counts of `kbmcp doctor`."""

from __future__ import annotations

import apsw

from kbmcp.store.admin import DatabaseFacts, count_by_store, count_rows
from kbmcp.store.sqlite.migrations import current_version, latest_version

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


counts = count_rows
counts_by_store = count_by_store


def _package_version(name: str) -> str | None:
    from importlib import metadata  # (not loaded by commands that never run the doctor)

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
