"""Finding the files to ingest: folders walked, hidden paths and `.gitignore`d paths skipped,
binary and non-UTF-8 files skipped, each skip counted by reason."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

BINARY_SNIFF_BYTES = 8192
MAX_FILE_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class SourceFile:
    path: Path  # absolute
    relative_path: (
        str  # '/'-separated, relative to the folder that was added (for a file: its name)
    )
    root: Path  # the folder the relative path is relative to


@dataclass
class WalkReport:
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count
    errors: list[str] = field(default_factory=list)


def iter_source_files(paths: list[Path], report: WalkReport) -> Iterator[SourceFile]:
    """Yield candidate files under `paths` in a stable (sorted) order."""
    for given in paths:
        target = given.expanduser().resolve()
        if target.is_file():
            yield SourceFile(target, target.name, target.parent)
        elif target.is_dir():
            yield from _walk_folder(target, report)
        else:
            report.errors.append(f"{given}: no such file or folder")


def _walk_folder(root: Path, report: WalkReport) -> Iterator[SourceFile]:
    specs: dict[Path, list[tuple[Path, pathspec.PathSpec]]] = {}

    def unreadable(exc: OSError) -> None:
        report.errors.append(f"{exc.filename}: cannot read folder ({exc.strerror or exc})")

    for folder, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=False):
        here = Path(folder)
        inherited = specs.get(here.parent, []) if here != root else []
        active = [*inherited, *_load_gitignore(here)]
        specs[here] = active
        kept_dirs = []
        for name in sorted(dirnames):
            if name.startswith("."):
                report.skipped["hidden"] += 1
            elif _ignored(here / name, active, is_dir=True):
                report.skipped["gitignored"] += 1
            else:
                kept_dirs.append(name)
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            file_path = here / name
            if name.startswith("."):
                report.skipped["hidden"] += 1
            elif _ignored(file_path, active, is_dir=False):
                report.skipped["gitignored"] += 1
            elif file_path.is_symlink() and not file_path.resolve().is_relative_to(root):
                report.skipped["symlink outside folder"] += 1
            else:
                yield SourceFile(file_path, file_path.relative_to(root).as_posix(), root)


def _load_gitignore(folder: Path) -> list[tuple[Path, pathspec.PathSpec]]:
    ignore_file = folder / ".gitignore"
    if not ignore_file.is_file():
        return []
    try:
        lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [(folder, pathspec.GitIgnoreSpec.from_lines(lines))]


def _ignored(path: Path, specs: list[tuple[Path, pathspec.PathSpec]], *, is_dir: bool) -> bool:
    """Git semantics: patterns are relative to the folder of their .gitignore; deeper files win."""
    ignored = False
    for base, spec in specs:
        relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        result = spec.check_file(relative)
        if result.include is not None:
            ignored = result.include
    return ignored


def read_text_file(path: Path) -> tuple[str | None, str | None]:
    """Return (text, None) for a UTF-8 text file, or (None, skip reason)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB"
        data = path.read_bytes()
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return None, "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    return text.removeprefix("\ufeff"), None
