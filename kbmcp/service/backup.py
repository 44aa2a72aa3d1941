"""`kbmcp backup`: a consistent copy of the knowledge base, taken while it is in use."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kbmcp.errors import InvalidRequest
from kbmcp.store.sqlite.backup import copy_database
from kbmcp.workspace import Workspace, holding_lock

FOLDER_ENDINGS = tuple({"/", os.sep})


@dataclass(frozen=True)
class BackupReport:
    source: str
    destination: str
    pages: int
    bytes: int
    seconds: float


def destination_path(source: Path, destination: Path | str, *, overwrite: bool) -> Path:
    """Where the copy goes: DEST, or DEST/<source name> for a folder. DEST ending in a path
    separator names a folder, which must exist (a Path forgets that slash, so DEST may come as
    the text the user typed). Never the source itself, and never over an existing file unless
    `overwrite`."""
    names_folder = isinstance(destination, str) and destination.endswith(FOLDER_ENDINGS)
    destination = Path(destination)
    if names_folder and not destination.is_dir():
        raise InvalidRequest(
            f"the folder {destination} does not exist", details={"argument": "DEST"}
        )
    target = destination / source.name if destination.is_dir() else destination
    if target.exists() and target.resolve() == source.resolve():
        raise InvalidRequest(
            f"{target} is the knowledge base itself: back it up to another path",
            details={"argument": "DEST"},
        )
    if target.exists() and not overwrite:
        raise InvalidRequest(
            f"{target} already exists: choose another path, or pass --force to replace it",
            details={"argument": "DEST"},
        )
    if not target.parent.is_dir():
        raise InvalidRequest(
            f"the folder {target.parent} does not exist", details={"argument": "DEST"}
        )
    return target


@holding_lock
def backup(
    workspace: Workspace, destination: Path | str, *, overwrite: bool = False
) -> BackupReport:
    """Copy the workspace's file to `destination` (see kbmcp/store/sqlite/backup.py). The copy is
    written beside the destination under a temporary name and renamed into place, so DEST is
    either the previous file or the complete, checked copy, never a partial one. A PostgreSQL
    database is refused (InvalidRequest naming `pg_dump` and `kbmcp copy`)."""
    started = time.perf_counter()
    if workspace.store.kind != "sqlite":
        # SQLite's online backup API copies a file; a server's database has its own tools.
        raise InvalidRequest(
            f"kbmcp backup copies a knowledge-base file, and {workspace.store.shown} is a "
            "PostgreSQL database: back it up with `pg_dump`, or copy it into a file with "
            f"`kbmcp copy {workspace.store.shown} FILE.db`",
            details={"argument": "--db", "db": workspace.store.shown},
        )
    source = workspace.settings.db_path
    target = destination_path(source, destination, overwrite=overwrite)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    pages = copy_database(workspace.conn, partial)
    os.replace(partial, target)
    return BackupReport(
        source=str(source),
        destination=str(target),
        pages=pages,
        bytes=target.stat().st_size,
        seconds=round(time.perf_counter() - started, 3),
    )
