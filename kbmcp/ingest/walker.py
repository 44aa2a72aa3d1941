"""Finding the files to ingest, and the reason every other file is left out.

A folder is walked in a stable (sorted) order. In each folder, for each entry, the first rule
that applies decides:

1. a name that is not valid UTF-8 (a Latin-1 `caf\xe9.md`): no path of the knowledge base can
   name it, and SQLite text must be UTF-8; skipped with its bytes shown as `\xe9`;
2. hidden (name starts with `.`; this includes `.git`, `.gitignore`, editors' swap files);
3. ignored by a `.gitignore` / `.kbmcpignore` (see `kbmcp.ingest.ignore`);
4. excluded by `--exclude`;
5. symbolic links: a loop or a dangling link is skipped, a linked folder is not followed
   (its files would be indexed twice or from outside), a linked file is read only if its
   target lies inside the added folder;
6. folders: build output (`node_modules`, `dist`, ...) is skipped; in the root of a Sphinx HTML
   build, `_sources/` (a copy of every source) and the generated index pages are skipped;
7. files: with `--include`, only matching files are taken (whatever their format); without,
   the format decides (`kbmcp.ingest.formats`).

A file or folder given directly is taken as named (hidden, ignore files and build folder names
do not apply to it); `--exclude`, `--include` and the format rule still apply to a named file.
A skipped folder counts once, whatever it holds. Reading (binary, UTF-8, size) comes later; only
regular files are read (kbmcp/ingest/reader.py): a FIFO, a socket or a device found here is
skipped there, by `special_file_reason`, without being opened.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from kbmcp.ingest.formats import (
    BUILD_OUTPUT,
    classify,
    included_kind,
    is_build_folder,
    is_sphinx_build,
    sphinx_build_reason,
)
from kbmcp.ingest.ignore import IgnoreRule, compile_globs, ignored_by, rules_above, rules_in

HIDDEN = "hidden"
NAME_NOT_UTF8 = "name not UTF-8"
EXCLUDED = "excluded (--exclude)"
NOT_INCLUDED = "not matched by --include"
SYMLINK_LOOP = "symlink loop"
BROKEN_SYMLINK = "broken symlink"
SYMLINK_OUTSIDE = "symlink outside folder"
SYMLINKED_FOLDER = "symlinked folder (not followed)"
NOT_REGULAR = "not a regular file"


@dataclass(frozen=True)
class SourceFile:
    path: Path  # absolute
    relative_path: str  # '/'-separated, relative to the folder that was added (a file: its name)
    root: Path  # the folder the relative path is relative to
    kind: str = "text"  # markdown | rst | text | html | pdf | code
    named: bool = False  # given directly (not found in an added folder)

    @property
    def folder(self) -> str:
        """The added folder its path is relative to ('': a file named directly)."""
        return "" if self.named else str(self.root)


@dataclass(frozen=True)
class Selection:
    """What the user asked for: `--include`, `--exclude` (gitignore-style globs, relative to
    the added folder) and `--code` (also index source code and configuration files)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    code: bool = False

    def __post_init__(self) -> None:
        # Fails early, naming the option, on a pattern that does not compile.
        compile_globs(self.include, option="--include")
        compile_globs(self.exclude, option="--exclude")


@dataclass
class WalkReport:
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    errors: list[str] = field(default_factory=list)

    def skip(self, path: Path | str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.append((shown_path(path), reason))


def shown_path(path: Path | str) -> str:
    """A path as text that can be printed and stored: bytes of a name that is not UTF-8 (which
    Python carries as lone surrogates) are shown as `\\xe9`."""
    text = str(path)
    if is_utf8(text):
        return text
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def is_utf8(text: str) -> bool:
    """Whether a name Python read from the file system is valid UTF-8 (no surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class Scope:
    """The part of the added folders a walk visits: the files and folders in `paths` (absolute,
    resolved: what changed, for a watch) and everything inside those folders. Folders on the
    way to them are listed, for their ignore files, and nothing else of them is looked at."""

    paths: frozenset[Path]

    @functools.cached_property
    def ancestors(self) -> frozenset[Path]:
        return frozenset(parent for path in self.paths for parent in path.parents)

    def covers(self, path: Path) -> bool:
        """Whether `path` is in the scope: named, or inside a named folder."""
        return path in self.paths or any(parent in self.paths for parent in path.parents)

    def reaches(self, path: Path) -> bool:
        """Whether a walk enters folder `path`: in the scope, or on the way to it."""
        return path in self.ancestors or self.covers(path)


def iter_source_files(
    paths: list[Path],
    report: WalkReport,
    selection: Selection = Selection(),
    scope: Scope | None = None,
) -> Iterator[SourceFile]:
    """Yield the files to read under `paths`, in a stable (sorted) order; with a `scope`, only
    those in it."""
    walker = _Walker(selection, report, scope)
    for given in paths:
        target = given.expanduser().absolute()
        try:
            resolved = target.resolve(strict=True)
        except RuntimeError:  # a symlink loop (Python < 3.13 raises this)
            report.skip(given, SYMLINK_LOOP)
            continue
        except OSError:
            report.errors.append(f"{shown_path(given)}: no such file or folder")
            continue
        if not is_utf8(str(resolved)):  # (named through a link, or from Python)
            report.skip(given, NAME_NOT_UTF8)
            continue
        if scope is not None and not scope.reaches(resolved):
            continue
        if resolved.is_dir():
            yield from walker.folder(resolved)
        elif resolved.is_file():
            source = walker.file(resolved, resolved.name, resolved.parent, display=given)
            if source is not None:
                yield dataclasses.replace(source, named=True)
        else:  # a FIFO, a socket, a device: never opened (reading one can block forever)
            try:
                reason = special_file_reason(resolved.stat().st_mode) or NOT_REGULAR
            except OSError:
                reason = NOT_REGULAR
            report.skip(given, reason)


class _Walker:
    def __init__(self, selection: Selection, report: WalkReport, scope: Scope | None) -> None:
        self.report = report
        self.scope = scope
        self.code = selection.code
        self.include: pathspec.PathSpec | None = (
            compile_globs(selection.include, option="--include") if selection.include else None
        )
        self.exclude = compile_globs(selection.exclude, option="--exclude")

    def file(
        self, path: Path, relative: str, root: Path, *, display: Path | str
    ) -> SourceFile | None:
        """Apply --exclude, --include and the format rule to one file."""
        if self.exclude.match_file(relative):
            self.report.skip(display, EXCLUDED)
            return None
        if self.include is not None:
            if not self.include.match_file(relative):
                self.report.skip(display, NOT_INCLUDED)
                return None
            return SourceFile(path, relative, root, included_kind(path.name))
        classification = classify(path.name, code=self.code)
        if classification.kind is None:
            self.report.skip(display, classification.reason or "skipped")
            return None
        return SourceFile(path, relative, root, classification.kind)

    def folder(self, root: Path) -> Iterator[SourceFile]:
        rules: dict[Path, list[IgnoreRule]] = {}
        report = self.report

        def unreadable(exc: OSError) -> None:
            report.errors.append(f"{exc.filename}: cannot read folder ({exc.strerror or exc})")

        for folder, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=False):
            here = Path(folder)
            inherited = rules[here.parent] if here != root else rules_above(root)
            active = [*inherited, *rules_in(here)]
            rules[here] = active
            sphinx = is_sphinx_build(filenames)
            scope = self.scope
            if scope is not None and not scope.covers(here):  # on the way to the scope
                dirnames[:] = [name for name in dirnames if scope.reaches(here / name)]
                filenames = [name for name in filenames if scope.covers(here / name)]
            kept = []
            for name in sorted(dirnames):
                reason = self._folder_reason(here / name, root, active)
                if reason is None and sphinx:
                    reason = sphinx_build_reason(name, is_dir=True)
                if reason is None:
                    kept.append(name)
                else:
                    report.skip((here / name).relative_to(root).as_posix() + "/", reason)
            dirnames[:] = kept
            for name in sorted(filenames):
                path = here / name
                relative = path.relative_to(root).as_posix()
                reason = self._file_reason(path, root, active)
                if reason is None and sphinx:
                    reason = sphinx_build_reason(name, is_dir=False)
                if reason is not None:
                    report.skip(relative, reason)
                    continue
                source = self.file(path, relative, root, display=relative)
                if source is not None:
                    yield source

    def _folder_reason(self, path: Path, root: Path, rules: list[IgnoreRule]) -> str | None:
        relative = path.relative_to(root).as_posix()
        if not is_utf8(path.name):
            return NAME_NOT_UTF8
        if path.name.startswith("."):
            return HIDDEN
        ignored = ignored_by(rules, path, is_dir=True)
        if ignored:
            return ignored
        if self.exclude.match_file(relative + "/"):
            return EXCLUDED
        if path.is_symlink():
            return _symlink_reason(path, root) or SYMLINKED_FOLDER
        if is_build_folder(path.name):
            return BUILD_OUTPUT
        return None

    @staticmethod
    def _file_reason(path: Path, root: Path, rules: list[IgnoreRule]) -> str | None:
        if not is_utf8(path.name):
            return NAME_NOT_UTF8
        if path.name.startswith("."):
            return HIDDEN
        ignored = ignored_by(rules, path, is_dir=False)
        if ignored:
            return ignored
        if path.is_symlink():
            return _symlink_reason(path, root)
        return None


def _symlink_reason(path: Path, root: Path) -> str | None:
    """Why a symbolic link is skipped (None: a file link whose target is inside `root`)."""
    try:
        target = path.resolve(strict=True)
    except RuntimeError:
        return SYMLINK_LOOP
    except OSError as exc:
        return SYMLINK_LOOP if exc.errno == errno.ELOOP else BROKEN_SYMLINK
    if not target.is_relative_to(root):
        return SYMLINK_OUTSIDE
    return None


# What is not a regular file, by its type: the reason it is skipped.
SPECIAL_FILES = (
    (stat.S_ISDIR, "folder"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def special_file_reason(mode: int) -> str | None:
    """None for a regular file; else why it is skipped, e.g. "not a regular file (FIFO)"."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in SPECIAL_FILES if test(mode)), "unknown type")
    return f"{NOT_REGULAR} ({kind})"
