"""Ignore files (`.gitignore`, `.kbmcpignore`) with git semantics, and `--include`/`--exclude`.

Patterns are relative to the folder of their file; a deeper file wins, and within a file the last
matching pattern wins (so `!keep.md` re-includes). Ignore files above the added folder count too,
up to the root of the git repository it lies in, as they would for git, with one exception: a
pattern that ignores the added folder itself (or a folder between it and the repository root) is
dropped, since naming a folder is asking for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pathspec

IGNORE_FILES = {".gitignore": "gitignored", ".kbmcpignore": "kbmcpignored"}


@dataclass(frozen=True)
class IgnoreRule:
    base: Path  # the folder its patterns are relative to
    spec: pathspec.PathSpec
    reason: str  # "gitignored" or "kbmcpignored"


def compile_globs(patterns: tuple[str, ...] | list[str], *, option: str) -> pathspec.PathSpec:
    """`--include` / `--exclude` patterns (gitignore syntax); a bad one is a ValueError naming
    the option."""
    for pattern in patterns:
        if not pattern.strip():
            raise ValueError(f"{option} expects a glob pattern, got an empty string")
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{option}: invalid pattern {pattern!r} ({exc})") from None
    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


def matches(spec: pathspec.PathSpec, relative: str, *, is_dir: bool) -> bool:
    """Whether a '/'-separated path relative to the added folder matches (a folder also
    matches a pattern written for it with a trailing slash)."""
    return spec.check_file(relative + ("/" if is_dir else "")).include is True


def rules_in(folder: Path) -> list[IgnoreRule]:
    """The ignore files of one folder."""
    rules = []
    for name, reason in IGNORE_FILES.items():
        lines = _read_lines(folder / name)
        if lines:
            rules.append(IgnoreRule(folder, pathspec.GitIgnoreSpec.from_lines(lines), reason))
    return rules


def rules_above(root: Path) -> list[IgnoreRule]:
    """Ignore files in the folders above `root` inside its git repository, outermost first."""
    repository = _repository_root(root)
    if repository is None or repository == root:
        return []
    folders = []
    folder = root.parent
    while True:
        folders.append(folder)
        if folder == repository:
            break
        folder = folder.parent
    rules = []
    for folder in reversed(folders):
        for name, reason in IGNORE_FILES.items():
            lines = _lines_not_ignoring(_read_lines(folder / name), folder, root)
            if lines:
                rules.append(IgnoreRule(folder, pathspec.GitIgnoreSpec.from_lines(lines), reason))
    return rules


def ignored_by(rules: list[IgnoreRule], path: Path, *, is_dir: bool) -> str | None:
    """The reason (`gitignored` / `kbmcpignored`) when the rules ignore `path`, else None."""
    reason = None
    for rule in rules:
        relative = path.relative_to(rule.base).as_posix() + ("/" if is_dir else "")
        result = rule.spec.check_file(relative)
        if result.include is not None:
            reason = rule.reason if result.include else None
    return reason


def _repository_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _read_lines(path: Path) -> list[str]:
    try:
        if not path.is_file():
            return []
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _lines_not_ignoring(lines: list[str], base: Path, root: Path) -> list[str]:
    """The patterns of an ignore file above `root`, less those that ignore `root` or a folder
    between `base` and it."""
    between = [root, *[p for p in root.parents if p != base and p.is_relative_to(base)]]
    folders = [p.relative_to(base).as_posix() + "/" for p in between]
    kept = []
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "!")):
            spec = pathspec.GitIgnoreSpec.from_lines([line])
            if any(spec.check_file(folder).include for folder in folders):
                continue
        kept.append(line)
    return kept
