"""`kbmcp watch` and `serve --watch`: keep a knowledge base in step with folders as they change.

The watcher (watchfiles: inotify / FSEvents / ReadDirectoryChangesW, polling as a fallback) waits
for changes, groups those that come together (until 50 ms pass without one, at most
DEBOUNCE_MS), and re-syncs every watched folder with the
same `add_paths` as `kbmcp add --prune`: changed files get a new revision, new files are added,
removed (or newly ignored) files are archived. Re-syncing whole folders rather than applying
single events is what makes editors' atomic saves (write a temporary file, rename it over the
original), renames and ignore-file edits come out right; an unchanged file costs a read and a
hash (~10,000 files in under 5 s), nothing is embedded twice.

The database file and its -wal/-shm companions are never watched, even inside a watched folder
(each write would trigger another sync). A failing sync (a folder briefly gone, a file locked)
is reported and the watcher goes on.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import apsw
import watchfiles

from kbmcp.access import WRITE, Principal
from kbmcp.errors import InvalidRequest, KbError
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
        first = False
        try:
            report = add_paths(workspace, principal, folders, options)
        except (KbError, apsw.Error, OSError) as error:
            if on_error is not None:
                on_error(error)
            continue
        if on_report is not None:
            on_report(report)


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
