"""Files and folders kbmcp creates are private to their owner, whatever the umask.

The file holds every document in clear text, so a new database, its `-wal` and `-shm`, and a
backup are created 0600, and folders kbmcp creates for them 0700. SQLite creates the `-wal`,
`-shm` and `-journal` files with the permissions of the main file (and corrects them for the
umask), so creating the main file 0600 is enough for all three. Existing files keep the mode
their owner gave them; `kbmcp doctor` warns when one is readable or writable by others.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
OTHERS = stat.S_IRWXG | stat.S_IRWXO
COMPANIONS = ("", "-wal", "-shm")  # the database and the files SQLite keeps beside it


def make_private_folder(folder: Path) -> None:
    """Create `folder` and its missing parents, each 0700 (existing ones are left alone)."""
    missing = []
    level = folder
    while not level.exists():
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=PRIVATE_FOLDER)
        except FileExistsError:  # made meanwhile by someone else: theirs to decide
            continue
        os.chmod(created, PRIVATE_FOLDER)  # mkdir's mode is narrowed by the umask, never widened
    if not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))


def create_private_file(path: Path) -> bool:
    """Create `path` as an empty 0600 file; False if it exists already (left as it is)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    try:
        os.fchmod(descriptor, PRIVATE_FILE)  # whatever the umask took away or left
    finally:
        os.close(descriptor)
    return True


def loose_permissions(db_path: Path) -> list[str]:
    """A warning for each of the database's files that others may read or write. The -wal and
    -shm files take the database's mode, so they are named only when they differ from it."""
    modes = {}
    for suffix in COMPANIONS:
        path = Path(f"{db_path}{suffix}")
        try:
            modes[path] = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue  # no -wal or -shm while no connection is open
    database_mode = modes.get(db_path)
    warnings = []
    for path, mode in modes.items():
        if mode & OTHERS and (path == db_path or mode != database_mode):
            warnings.append(
                f"{path} has mode {mode:04o}: other users may read every document in it; "
                f"restrict it with `chmod go= {path}`"
            )
    return warnings
