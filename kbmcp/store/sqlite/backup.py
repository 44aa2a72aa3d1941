"""Copying the open file with SQLite's online backup API.

The copy is one consistent snapshot even while servers and ingests use the file: in WAL mode
the backup reads inside one read transaction, which writers do not wait for. The copy is
switched to the rollback journal (`journal_mode=DELETE`), so it is a single self-contained file
that can be shipped or opened read-only anywhere, then checked with `PRAGMA integrity_check`.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from kbmcp.errors import StoreError
from kbmcp.store.sqlite.connection import load_sqlite_vec
from kbmcp.store.sqlite.files import create_private_file


def copy_database(source: apsw.Connection, destination: Path) -> int:
    """Copy `source` into the new file `destination`; returns the number of pages copied.
    The destination is removed again if anything fails. It is created private (0600), as the
    knowledge base itself is (kbmcp/store/sqlite/files.py)."""
    try:
        create_private_file(destination)
    except OSError as exc:
        raise StoreError(
            f"cannot create the copy at {destination}: {exc.strerror or exc}",
            details={"path": str(destination)},
        ) from None
    target = apsw.Connection(str(destination))
    try:
        with target.backup("main", source, "main") as backup:
            backup.step(-1)  # every page in one step: one snapshot of the source
            pages = backup.page_count
        target.execute("PRAGMA journal_mode = DELETE").fetchall()
        load_sqlite_vec(target)  # the schema names vec0: checking it needs the module
        problems = [row[0] for row in target.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise StoreError(
                f"the copy at {destination} failed its integrity check: {problems[:3]}",
                details={"path": str(destination)},
            )
    except BaseException:
        target.close()
        destination.unlink(missing_ok=True)
        raise
    target.close()
    return pages
