"""Versioned schema migrations, the part both backends share: the numbered `sql/NNN_name.sql`
files of a backend's package, read in order. How they are applied and recorded is the backend's
(kbmcp/store/sqlite/migrations.py: `PRAGMA user_version`; kbmcp/store/postgres/migrations.py: a
version table under an advisory lock), each in ONE transaction.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

_FILE_NAME = re.compile(r"^(?P<version>\d{3})_(?P<name>\w+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def read_migrations(package: str) -> list[Migration]:
    """The migrations in the `sql` folder of `package`, by version (1..n without gaps)."""
    return list(_read_migrations(package))


# Read once per process: opening a connection asks for the migrations three times (the file's
# kind, its version, migrate), and listing the folder and reading every file each time cost
# ~1 ms a call. The files are part of the installed package: they cannot change under a
# running kbmcp (an upgrade restarts it).
@functools.cache
def _read_migrations(package: str) -> tuple[Migration, ...]:
    found = []
    for entry in resources.files(package).joinpath("sql").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(
                Migration(int(match["version"]), match["name"], entry.read_text(encoding="utf-8"))
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration files must be numbered 1..n without gaps, found {versions}")
    return tuple(found)
