"""Choosing what is indexed: --include/--exclude, ignore files (also above the added folder),
build output, symlinks, unreadable and non-UTF-8 files, and one document per file when a
subfolder of an added folder is added again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbmcp.errors import InvalidRequest
from kbmcp.ingest.walker import Selection, WalkReport, iter_source_files
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.ingest_preview import preview_paths
from kbmcp.workspace import Workspace
from tests.file_tree import write_tree


def walk(paths: list[Path], selection: Selection | None = None) -> tuple[list[str], WalkReport]:
    report = WalkReport()
    chosen = selection or Selection()
    found = [source.relative_path for source in iter_source_files(paths, report, chosen)]
    return found, report


def test_include_and_exclude_globs(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "docs",
        {
            "a.md": "# A",
            "b.md": "# B",
            "drafts/c.md": "# C",
            "api/x.py": "x = 1",
            "api/notes.md": "# Notes",
            "data.csv": "a,b",
        },
    )
    found, report = walk([root], Selection(exclude=("drafts/", "b.md")))
    assert found == ["a.md", "api/notes.md"]
    assert report.skipped_paths == [  # in walk order: a folder's files, then its subfolders
        ("drafts/", "excluded (--exclude)"),
        ("b.md", "excluded (--exclude)"),
        ("data.csv", "not a document format"),
        ("api/x.py", "code or config (use --code)"),
    ]
    # --include takes only matching files, whatever their format
    found, report = walk([root], Selection(include=("*.py", "*.csv", "/a.md")))
    assert found == ["a.md", "data.csv", "api/x.py"]
    assert report.skipped == {"not matched by --include": 3}
    # both: exclude wins
    found, _ = walk([root], Selection(include=("*.md",), exclude=("api/",)))
    assert found == ["a.md", "b.md", "drafts/c.md"]  # api/ pruned


def test_a_bad_glob_is_an_error_naming_the_option() -> None:
    with pytest.raises(ValueError, match="--exclude expects a glob pattern"):
        Selection(exclude=("  ",))


def test_ignore_files_above_the_added_folder_inside_the_repository(tmp_path: Path) -> None:
    repo = write_tree(
        tmp_path / "repo",
        {
            ".gitignore": "*.draft.md\ndocs/\n/top-only.md\n",
            ".kbmcpignore": "internal/\n",
            "docs/guide/.kbmcpignore": "secret.md\n",
            "docs/guide/a.md": "# A",
            "docs/guide/b.draft.md": "# B",
            "docs/guide/internal/x.md": "# X",
            "docs/guide/secret.md": "# S",
            "docs/guide/top-only.md": "# anchored pattern at the root does not match here",
        },
    )
    (repo / ".git").mkdir()
    found, report = walk([repo / "docs" / "guide"])
    # `docs/` in the root .gitignore ignores the added folder itself: that pattern is dropped,
    # the others apply with paths relative to their own folder
    assert found == ["a.md", "top-only.md"]
    assert sorted(report.skipped_paths) == [
        (".kbmcpignore", "hidden"),
        ("b.draft.md", "gitignored"),
        ("internal/", "kbmcpignored"),
        ("secret.md", "kbmcpignored"),
    ]
    # outside a git repository, only the folder's own ignore files count
    os.rename(repo / ".git", repo / "not-git")
    found, _ = walk([repo / "docs" / "guide"])
    assert found == ["a.md", "b.draft.md", "top-only.md", "internal/x.md"]


def test_build_output_folders_are_skipped_unless_added_directly(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "proj",
        {
            "README.md": "# Readme",
            "node_modules/lib/README.md": "# dep",
            "site/index.html": "<h1>built</h1>",
            "pkg.egg-info/PKG-INFO": "x",
        },
    )
    found, report = walk([root])
    assert found == ["README.md"]
    assert report.skipped == {"build output": 3}
    found, _ = walk([root / "site"])
    assert found == ["index.html"]


def test_symlink_loops_dangling_links_and_linked_folders(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "docs", {"real.md": "# Real", "sub/inner.md": "# Inner"})
    outside = write_tree(tmp_path / "outside", {"o.md": "# O"})
    (root / "loop-a.md").symlink_to(root / "loop-b.md")
    (root / "loop-b.md").symlink_to(root / "loop-a.md")
    (root / "self").symlink_to(root / "self")
    (root / "gone.md").symlink_to(tmp_path / "missing.md")
    (root / "alias.md").symlink_to(root / "real.md")
    (root / "out.md").symlink_to(outside / "o.md")
    (root / "linked").symlink_to(root / "sub", target_is_directory=True)
    found, report = walk([root])
    assert found == ["alias.md", "real.md", "sub/inner.md"]
    assert report.skipped == {
        "symlink loop": 3,
        "broken symlink": 1,
        "symlink outside folder": 1,
        "symlinked folder (not followed)": 1,
    }
    found, report = walk([root / "loop-a.md"])  # named directly
    assert found == [] and report.skipped == {"symlink loop": 1}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_files_are_counted(workspace: Workspace, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "docs", {"ok.md": "# Ok", "locked.md": "# Locked"})
    (root / "locked.md").chmod(0)
    try:
        report = add_paths(workspace, workspace.local_principal(), [root])
    finally:
        (root / "locked.md").chmod(0o644)
    assert report.added == 1 and report.skipped == {"unreadable (Permission denied)": 1}


def test_unreadable_non_utf8_and_loops_are_skips_not_failures(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tree(
        tmp_path / "docs",
        {"ok.md": "# Ok", "latin.md": "caf\xe9".encode("latin-1"), "locked.md": "# Locked"},
    )
    (root / "loop.md").symlink_to(root / "loop.md")
    real_open = os.open

    def open_file(path: str | Path, flags: int, *args: int, **kwargs: int) -> int:
        if Path(path).name == "locked.md":  # (as root, a mode of 000 would not stop the read)
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_file)
    report = add_paths(workspace, workspace.local_principal(), [root])
    assert (report.added, report.errors) == (1, [])
    assert report.skipped == {
        "not UTF-8": 1,
        "symlink loop": 1,
        "unreadable (Permission denied)": 1,
    }


def test_readding_a_subfolder_keeps_one_document_per_file(
    workspace: Workspace, tmp_path: Path
) -> None:
    root = write_tree(
        tmp_path / "docs",
        {"index.md": "# Index", "guide/a.md": "# A\n\nalpha", "guide/deep/b.md": "# B"},
    )
    principal = workspace.local_principal()
    add_paths(workspace, principal, [root])
    (root / "guide" / "a.md").write_text("# A\n\nalpha, edited")
    (root / "guide" / "new.md").write_text("# New")
    report = add_paths(workspace, principal, [root / "guide"])
    assert (report.added, report.updated, report.unchanged) == (1, 1, 1)
    paths = [row[0] for row in workspace.conn.execute("SELECT path FROM document ORDER BY path")]
    assert paths == ["guide/a.md", "guide/deep/b.md", "guide/new.md", "index.md"]
    # a file named directly lands on its document too
    report = add_paths(workspace, principal, [root / "guide" / "deep" / "b.md"])
    assert (report.added, report.unchanged) == (0, 1)
    # the other way round: a subfolder first, then its parent: the subfolder's documents move
    # to paths relative to the parent (tests/test_ingest_order.py)
    other = IngestOptions(knowledge_base="other")
    add_paths(workspace, principal, [root / "guide"], other)
    report = add_paths(workspace, principal, [root], other)
    assert (report.added, report.moved, report.unchanged) == (1, 3, 3)
    rows = workspace.conn.execute(
        "SELECT d.path FROM document d JOIN knowledge_base k ON k.id = d.knowledge_base_id "
        "WHERE k.name = 'other' ORDER BY d.path"
    ).fetchall()
    assert [row[0] for row in rows] == ["guide/a.md", "guide/deep/b.md", "guide/new.md", "index.md"]


def test_the_dry_run_writes_nothing_and_needs_no_database(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "docs", {"a.md": "# A\n\ntext", "b.png": b"\x89PNG\x00"})
    preview = preview_paths([root])
    assert [(f.path, f.kind, f.chunks) for f in preview.files] == [("a.md", "markdown", 1)]
    assert preview.skipped == [("b.png", "image")]
    assert preview.summary_line() == "would index 1 file (1 chunk), skip 1 (image 1)"
    with pytest.raises(InvalidRequest, match="no such file or folder"):
        preview_paths([tmp_path / "nope"])


def test_a_path_held_by_another_existing_file_is_refused(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Two folders with the same names: the second does not silently swap the first's
    documents; a moved file (the old one is gone) still takes its document along."""
    write_tree(tmp_path / "a", {"readme.md": "# From a"})
    write_tree(tmp_path / "b", {"readme.md": "# From b", "only-b.md": "# Only b"})
    principal = workspace.local_principal()
    add_paths(workspace, principal, [tmp_path / "a"])
    report = add_paths(workspace, principal, [tmp_path / "b"])
    assert (report.added, report.updated) == (1, 0)
    assert report.skipped == {"path taken by another file": 1}
    assert "is already the document of" in report.warnings[0]
    assert "common parent folder" in report.warnings[0]
    title = workspace.conn.execute("SELECT title FROM document WHERE path = 'readme.md'")
    assert title.fetchone() == ("From a",)
    (tmp_path / "a" / "readme.md").unlink()  # moved: now b's file may take the path
    report = add_paths(workspace, principal, [tmp_path / "b"])
    assert (report.updated, report.skipped) == (1, {})
