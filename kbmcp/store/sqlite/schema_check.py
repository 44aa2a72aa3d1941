"""Does the file's schema match the version it claims (PRAGMA user_version)?

Migrations start from the version the file records. A file whose tables do not match that
number (edited by hand, `user_version` reset by a tool, tables dropped) would fail half-way
through a migration with "table already exists" or "no such table". It is refused before
anything is written, naming what is missing and what belongs to a later version.

The expected schema of version N is what migrations 1..N make of an empty database in memory
(computed once per process, a few milliseconds). Only names are compared: objects kbmcp does not
make in migrations (the vec0 index, which kbmcp/store/sqlite/vectors.py creates, and anything a user
added) are ignored.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import apsw

from kbmcp.store.sqlite.migrations import all_migrations, migrate

# Objects kbmcp's migrations make (tables, their indexes, triggers, views); SQLite's own
# (sqlite_sequence, sqlite_stat1, sqlite_autoindex_*) are not part of a version's schema.
SELECT_OBJECTS = """
SELECT type, name FROM sqlite_schema
WHERE type IN ('table', 'index', 'trigger', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
"""
SHOWN = 5  # names shown in the message


@dataclass(frozen=True)
class SchemaMismatch:
    missing: frozenset[str]  # made by migrations up to the file's version, absent from the file
    early: frozenset[str]  # made by later migrations, already present in the file

    def describe(self) -> str:
        parts = []
        if self.missing:
            parts.append("missing " + _names(self.missing))
        if self.early:
            parts.append("already has " + _names(self.early) + " of a later version")
        return "; ".join(parts)


def schema_mismatch(conn: apsw.Connection, version: int) -> SchemaMismatch | None:
    """How the file's objects differ from those of `version`, or None if they match."""
    present = _objects(conn)
    expected = expected_objects(version)
    later = expected_objects(len(all_migrations())) - expected
    missing, early = expected - present, later & present
    if not missing and not early:
        return None
    return SchemaMismatch(frozenset(missing), frozenset(early))


@functools.cache
def expected_objects(version: int) -> frozenset[str]:
    """`type name` of every object migrations 1..version make."""
    conn = apsw.Connection(":memory:")
    try:
        migrate(conn, target=version)
        return _objects(conn)
    finally:
        conn.close()


def _objects(conn: apsw.Connection) -> frozenset[str]:
    return frozenset(f"{kind} {name}" for kind, name in conn.execute(SELECT_OBJECTS))


# Tables first: they say most about what happened to a file (an index follows its table).
_KIND_ORDER = {"table": 0, "view": 1, "trigger": 2, "index": 3}


def _names(objects: frozenset[str]) -> str:
    ranked = sorted(objects, key=lambda o: (_KIND_ORDER.get(o.split(" ", 1)[0], 4), o))
    shown = ranked[:SHOWN]
    more = f" and {len(objects) - SHOWN} more" if len(objects) > SHOWN else ""
    return ", ".join(shown) + more
