"""`kbmcp watch` and `serve --watch`: keep a knowledge base in step with folders as they change.

The watcher (watchfiles: inotify / FSEvents / ReadDirectoryChangesW, polling as a fallback) waits
for changes, groups those that come together (until 50 ms pass without one, at most
DEBOUNCE_MS), and syncs the paths they name with the same `add_paths` as `kbmcp add --prune`,
scoped to those paths: changed files get a new revision, new files are added, removed (or newly
ignored) files are archived. A path stands for what is there now, whatever the event said, so
editors' atomic saves (write a temporary file, rename it over the original) and renames come
out right; a changed folder is synced whole, and a changed ignore file stands for its folder.
Nothing outside the named paths is opened (the folders on the way are listed, for their ignore
files); the first sync is a full one, where an unchanged file costs a stat.

The database file and its -wal/-shm companions are never watched, even inside a watched folder
(each write would trigger another sync). A failing sync (a folder briefly gone, a file locked)
is reported and the watcher goes on.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import apsw
import watchfiles

from kbmcp.access import WRITE, Principal
from kbmcp.errors import InvalidRequest, KbError
from kbmcp.ingest.ignore import IGNORE_FILES
from kbmcp.ingest.walker import Scope
from kbmcp.service.ingest import IngestOptions, IngestReport, add_paths
from kbmcp.workspace import Workspace

# The longest a burst of changes is grouped into one sync (a burst ends after 50 ms without a
# change, so an editor's save is one sync and a sync follows a change within a second).
DEBOUNCE_MS = 400
# How often the watcher wakes up without changes (to see a stop request).
TIMEOUT_MS = 200
DEFAULT_OPTIONS = IngestOptions()


def watch_paths(
    workspace: Workspace,
    principal: Principal,
    paths: Sequence[Path],
    options: IngestOptions = DEFAULT_OPTIONS,
    *,
    on_report: Callable[[IngestReport], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Sync `paths` (folders) into the knowledge base, then again after every change, until
    `stop` is set (or Ctrl-C). The first sync runs once the watcher is listening, so no change
    made after this call can be missed. `on_report` gets each sync's report."""
    principal.require(WRITE)
    folders = watched_folders(paths)
    options = dataclasses.replace(options, prune=True)
    database = str(workspace.settings.db_path.expanduser().resolve())
    watch_filter = watchfiles.DefaultFilter(ignore_paths=[database])
    first = True
    changes: set[tuple[watchfiles.Change, str]]
    for changes in watchfiles.watch(
        *folders,
        watch_filter=watch_filter,
        debounce=DEBOUNCE_MS,
        rust_timeout=TIMEOUT_MS,
        yield_on_timeout=True,
        stop_event=stop,
        raise_interrupt=False,
    ):
        if not (first or changes):
            continue
        scope = None if first else changed_scope(changes, folders)
        first = False
        try:
            report = add_paths(workspace, principal, folders, options, scope=scope)
        except (KbError, apsw.Error, OSError) as error:
            if on_error is not None:
                on_error(error)
            continue
        if on_report is not None:
            on_report(report)


def changed_scope(changes: Iterable[tuple[object, str]], folders: Sequence[Path]) -> Scope | None:
    """The files and folders a sync looks at after these changes: those the events name, with
    an ignore file standing for its whole folder (its patterns may change what is indexed
    anywhere below it). None (everything) when a watched folder itself changed."""
    paths = set()
    for _change, name in changes:
        path = Path(name)
        if path in folders:
            return None
        paths.add(path.parent if path.name in IGNORE_FILES else path)
    return Scope(frozenset(paths))


def changed(report: IngestReport) -> bool:
    """Whether a sync changed anything (worth a line of output)."""
    return bool(report.added or report.updated or report.archived or report.errors)


def watched_folders(paths: Sequence[Path]) -> list[Path]:
    """The folders to watch, resolved; an `InvalidRequest` for a file or a missing path."""
    if not paths:
        raise InvalidRequest("no folders to watch", details={"argument": "paths"})
    folders = []
    for path in paths:
        resolved = path.expanduser().resolve()
        if not resolved.is_dir():
            raise InvalidRequest(
                f"watch needs a folder, not {'a file' if resolved.exists() else 'a missing path'}:"
                f" {path}",
                details={"argument": "paths", "path": str(path)},
            )
        folders.append(resolved)
    return folders
