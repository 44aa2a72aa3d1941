"""No file is lost by the order of adds (issue 19, item 3): whatever order a folder and its
subfolders (or files) are added in, every file ends up indexed exactly once, under the path it
has relative to the outermost added folder; a subfolder's documents move under a parent added
later, keeping their ids and revisions."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.file_tree import write_tree
from tests.store_backends import rows

TREE = {
    "index.md": "# Home\n\nThe top page about herons.\n",
    "sub/index.md": "# Sub home\n\nThe sub page about egrets.\n",
    "sub/deep/index.md": "# Deep home\n\nThe deep page about bitterns.\n",
    "sub/notes.md": "# Notes\n\nstorks\n",
}


def documents(workspace: Workspace, kb: str) -> dict[str, tuple[str, str, int]]:
    """path -> (document id, current revision id, revision count), published only."""
    found = rows(
        workspace,
        "SELECT d.path, d.public_id, r.public_id, "
        "       (SELECT count(*) FROM revision WHERE document_id = d.id) "
        "FROM document AS d JOIN knowledge_base AS k ON k.id = d.knowledge_base_id "
        "JOIN revision AS r ON r.id = d.current_revision_id "
        "WHERE k.name = ? AND d.status = 'published' ORDER BY d.path",
        kb,
    )
    return {path: (doc, rev, count) for path, doc, rev, count in found}


def test_a_subfolder_then_its_parent_loses_nothing(tmp_path: Path, workspace: Workspace) -> None:
    """The issue's case: `add d/sub` then `add d` skipped d/index.md for good ("path taken by
    another file"), with a warning recommending exactly what had just been done."""
    root = write_tree(tmp_path / "d", TREE)
    principal = workspace.local_principal()
    add_paths(workspace, principal, [root / "sub"])
    before = documents(workspace, "default")
    assert set(before) == {"index.md", "deep/index.md", "notes.md"}  # relative to d/sub

    report = add_paths(workspace, principal, [root])
    assert report.warnings == [] and report.skipped == {}
    assert (report.added, report.moved, report.unchanged) == (1, 3, 3)
    after = documents(workspace, "default")
    assert set(after) == set(TREE)
    # the subfolder's documents moved, keeping their ids and revisions
    assert after["sub/index.md"] == before["index.md"]
    assert after["sub/deep/index.md"] == before["deep/index.md"]
    assert after["sub/notes.md"] == before["notes.md"]
    request = SearchRequest("page", mode="lexical")
    found = {r.path for r in search(workspace, principal, request).results}
    assert found == {"index.md", "sub/index.md", "sub/deep/index.md"}
    # stable: adding either again changes nothing
    for again in (root, root / "sub"):
        report = add_paths(workspace, principal, [again])
        assert (report.added, report.moved, report.updated) == (0, 0, 0), again
    assert documents(workspace, "default") == after


@pytest.mark.parametrize(
    "order",
    list(itertools.permutations(["d", "d/sub", "d/sub/deep", "d/sub/notes.md"])),
    ids=lambda order: " then ".join(order),
)
def test_every_order_of_adds_ends_with_every_file_once(
    tmp_path: Path, workspace: Workspace, order: tuple[str, ...]
) -> None:
    write_tree(tmp_path / "d", TREE)
    principal = workspace.local_principal()
    for path in order:
        report = add_paths(workspace, principal, [tmp_path / path])
        assert report.skipped == {} and report.warnings == [], (path, report.warnings)
    final = documents(workspace, "default")
    assert set(final) == set(TREE)  # exactly once each, relative to the outermost folder
    assert all(count == 1 for _doc, _rev, count in final.values())  # nothing re-written


def test_sibling_folders_with_the_same_names_then_their_parent(
    tmp_path: Path, workspace: Workspace
) -> None:
    """Two folders with the same file names: the second is refused with a warning to add their
    common parent folder, and adding that folder then indexes both, each once."""
    write_tree(tmp_path / "p", {"a/readme.md": "# From a\n", "b/readme.md": "# From b\n"})
    principal = workspace.local_principal()
    add_paths(workspace, principal, [tmp_path / "p" / "a"])
    report = add_paths(workspace, principal, [tmp_path / "p" / "b"])
    assert report.skipped == {"path taken by another file": 1}
    assert "add their common parent folder" in report.warnings[0]
    report = add_paths(workspace, principal, [tmp_path / "p"])  # what the warning says
    assert (report.added, report.moved) == (1, 1) and report.skipped == {}
    assert set(documents(workspace, "default")) == {"a/readme.md", "b/readme.md"}


def test_files_named_directly_keep_their_names_until_their_folder_is_added(
    tmp_path: Path, workspace: Workspace
) -> None:
    root = write_tree(tmp_path / "d", TREE)
    principal = workspace.local_principal()
    add_paths(workspace, principal, [root / "sub" / "notes.md", root / "index.md"])
    assert set(documents(workspace, "default")) == {"notes.md", "index.md"}
    # a file named directly does not make its folder an added folder: a sibling folder added
    # next is placed relative to itself, not to the named file's folder
    add_paths(workspace, principal, [root / "sub" / "deep"], IngestOptions(knowledge_base="x"))
    add_paths(
        workspace,
        principal,
        [root / "sub" / "deep" / "index.md"],
        IngestOptions(knowledge_base="x"),
    )
    assert set(documents(workspace, "x")) == {"index.md"}
    report = add_paths(workspace, principal, [root])
    assert (report.added, report.moved) == (2, 1)  # notes.md moves to sub/notes.md
    assert set(documents(workspace, "default")) == set(TREE)
