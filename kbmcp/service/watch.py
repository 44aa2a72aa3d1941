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

Bursts (a `git pull`, a build writing many pages) stay responsive: a sync commits files in small
batches as they are embedded (kbmcp/service/ingest_batch.py), and changes keep being collected
by a thread of their own while it runs. When a few paths change (an edit: at most JUMP_PATHS),
the running sync commits what is ready and defers the rest; the edit is synced first, then the
deferred files, with what was already extracted and embedded for them (never a file extracted
twice: kbmcp/service/ingest_carry.py).

The database file and its -wal/-shm companions are never watched, even inside a watched folder
(each write would trigger another sync); a PostgreSQL database has no file here, so nothing is
left out. A failing sync (a folder briefly gone, a file locked, the database server restarting)
is reported and the watcher goes on.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import watchfiles

from kbmcp.access import WRITE, Principal
from kbmcp.errors import InvalidRequest, KbError
from kbmcp.ingest.ignore import IGNORE_FILES
from kbmcp.ingest.walker import Scope
from kbmcp.service.ingest import IngestOptions, IngestReport, add_paths
from kbmcp.service.ingest_carry import Carry
from kbmcp.workspace import Workspace

# The longest a burst of changes is grouped into one sync (a burst ends after 50 ms without a
# change, so an editor's save is one sync and a sync follows a change within a second).
DEBOUNCE_MS = 400
# How often the watcher wakes up without changes (to see a stop request).
TIMEOUT_MS = 200
# At most this many changed paths make a running sync stop and defer its remaining files, so
# that an edit is searchable within seconds during a burst (a `git pull` of 100 files).
JUMP_PATHS = 8
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
    made after this call can be missed. `on_report` gets each sync's report.

    Changes are collected by a thread of their own while a sync runs. A few changed paths (an
    edit) jump the queue: the running sync commits what is ready and defers the rest (see
    `ChangeFeed.jump`), the new change is synced, then the deferred files."""
    principal.require(WRITE)
    folders = watched_folders(paths)
    options = dataclasses.replace(options, prune=True)
    stop = stop or threading.Event()
    feed = ChangeFeed(folders, own_files(workspace))
    feed.start()
    try:
        if not feed.wait_listening(stop):
            return
        deferred: set[Path] = set()
        carry = Carry()  # what deferred files were already extracted to (ingest_carry.py)
        scope: Scope | None = None  # the first sync: everything
        while True:
            try:
                report = add_paths(
                    workspace,
                    principal,
                    folders,
                    options,
                    scope=scope,
                    interrupt=feed.jump,
                    carry=carry,
                )
            except (KbError, *workspace.store.driver_errors, OSError) as error:
                if on_error is not None:
                    on_error(error)
            else:
                deferred.update(report.deferred)
                if on_report is not None:
                    on_report(report)
            # Until the next sync, the connection may be closed when idle (`serve --watch` on
            # PostgreSQL: kbmcp/leases.py).
            workspace.release_connection()
            # Next: what changed since (first), else what was deferred, else wait for a change.
            changes = feed.take(stop, wait=not deferred)
            if changes is None:
                return
            if changes:
                scope = changed_scope(changes, folders)
            else:
                scope, deferred = Scope(frozenset(deferred)), set()
    finally:
        feed.stop()


def own_files(workspace: Workspace) -> list[str]:
    """The paths a sync writes to, never watched: the knowledge-base file (watchfiles ignores
    every path that starts with it: its -wal and -shm companions too); none for a PostgreSQL
    database."""
    if workspace.store.kind != "sqlite":
        return []
    return [str(workspace.settings.db_path.expanduser().resolve())]


class ChangeFeed:
    """watchfiles in a thread of its own: changes pile up here while a sync runs."""

    def __init__(self, folders: list[Path], ignored: Sequence[str]) -> None:
        self.folders = folders
        self.filter = watchfiles.DefaultFilter(ignore_paths=list(ignored))
        self.halt = threading.Event()
        self.listening = threading.Event()
        self.arrived = threading.Condition()
        self.changes: set[tuple[watchfiles.Change, str]] = set()
        self.thread = threading.Thread(target=self._run, name="kbmcp-watch-feed", daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        try:
            for changes in watchfiles.watch(
                *self.folders,
                watch_filter=self.filter,
                debounce=DEBOUNCE_MS,
                rust_timeout=TIMEOUT_MS,
                yield_on_timeout=True,
                stop_event=self.halt,
                raise_interrupt=False,
            ):
                self.listening.set()  # the first yield comes once the watcher is set up
                if changes:
                    with self.arrived:
                        self.changes.update(changes)
                        self.arrived.notify_all()
        except BaseException as failure:  # reported by take(); the thread must not die silently
            self.failure = failure
        finally:
            self.listening.set()
            with self.arrived:
                self.arrived.notify_all()

    def wait_listening(self, stop: threading.Event) -> bool:
        """Wait until the watcher is set up (False: stopped first)."""
        while not self.listening.wait(TIMEOUT_MS / 1000):
            if stop.is_set():
                return False
        self._raise_failure()
        return not stop.is_set()

    def take(
        self, stop: threading.Event, *, wait: bool
    ) -> set[tuple[watchfiles.Change, str]] | None:
        """The changes collected so far, emptied; with `wait`, block until there are some.
        None when `stop` is set."""
        with self.arrived:
            while wait and not self.changes and not stop.is_set():
                self._raise_failure()
                self.arrived.wait(TIMEOUT_MS / 1000)
            if stop.is_set():
                return None
            changes, self.changes = self.changes, set()
            return changes

    def jump(self) -> bool:
        """Whether a running sync should make way: a few paths changed since it started (an
        edit, a save), not a burst that can wait its turn."""
        with self.arrived:
            return 0 < len({path for _change, path in self.changes}) <= JUMP_PATHS

    def _raise_failure(self) -> None:
        if self.failure is not None and not isinstance(self.failure, KeyboardInterrupt):
            raise self.failure


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


def error_line(error: BaseException) -> str:
    """A failed sync in one line: kbmcp's message, else the first line of the driver's or the
    system's (a lost PostgreSQL connection is reported over several lines)."""
    message = getattr(error, "message", None) or str(error)
    return (message.strip().splitlines() or [type(error).__name__])[0]


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
