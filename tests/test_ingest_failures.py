"""One bad file never aborts an add (issue 20, item 2): a file name that is not UTF-8 is skipped
with a reason, a file that fails to embed or to write is reported while every other file of its
batch is indexed, and command-line arguments that are not UTF-8 are a one-line usage error."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest
from kbmcp.service.ingest import add_paths
from kbmcp.service.ingest_preview import preview_paths
from kbmcp.store.sqlite import index as sqlite_index
from kbmcp.workspace import Workspace
from tests.cli_support import Run, assert_one_line_error
from tests.file_tree import write_tree

LATIN1_NAME = os.fsdecode(b"caf\xe9.md")  # `café.md` written by a Latin-1 system
LATIN1_FOLDER = os.fsdecode(b"r\xe9sum\xe9s")


def good_files(count: int) -> dict[str, str]:
    return {f"note{i:03}.md": f"# Note {i}\n\nheron number {i}\n" for i in range(count)}


def indexed_paths(workspace: Workspace) -> list[str]:
    return [
        path
        for (path,) in workspace.conn.execute(
            "SELECT d.path FROM document AS d WHERE d.status = 'published' ORDER BY d.path"
        )
    ]


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_indexed(
    tmp_path: Path, workspace: Workspace
) -> None:
    # More one-chunk files than one embedding window (EMBED_BATCH_CHUNKS, 256): the bad name
    # shares its window with good files, and later windows follow.
    root = write_tree(tmp_path / "docs", {**good_files(300), "sub/deep.md": "# Deep\n"})
    (root / LATIN1_NAME).write_bytes(b"# Caf\xc3\xa9\n\ncr\xc3\xa8me\n")
    (root / LATIN1_FOLDER).mkdir()
    (root / LATIN1_FOLDER / "cv.md").write_text("# CV\n")
    for _run in range(2):  # run after run
        report = add_paths(workspace, workspace.local_principal(), [root])
        assert report.errors == []
        assert report.skipped == {"name not UTF-8": 2}  # the file, and the folder once
        assert [w for w in report.warnings if "not UTF-8" in w] == [
            "r\\xe9sum\\xe9s/: the name is not UTF-8, skipped (rename it, e.g. convmv -f latin1 "
            "-t utf8)",
            "caf\\xe9.md: the name is not UTF-8, skipped (rename it, e.g. convmv -f latin1 "
            "-t utf8)",
        ]
    assert len(indexed_paths(workspace)) == 301
    # --dry-run says the same, with printable names
    preview = preview_paths([root])
    assert len(preview.files) == 301
    assert [entry for entry in preview.skipped if entry[1] == "name not UTF-8"] == [
        ("r\\xe9sum\\xe9s/", "name not UTF-8"),
        ("caf\\xe9.md", "name not UTF-8"),
    ]
    # from Python, a path that is not UTF-8 is an InvalidRequest before anything is written
    with pytest.raises(InvalidRequest, match=r"path is not valid UTF-8: .*caf\\xe9\.md"):
        add_paths(workspace, workspace.local_principal(), [root / LATIN1_NAME])


class PoisonEmbedder(DelegatingEmbedder):
    """Fails on any input containing `poison`, as a model can fail on one odd text."""

    def __init__(self) -> None:
        super().__init__(HashingEmbedder())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any("poison" in text for text in texts):
            raise ValueError("the model cannot take this text")
        return self.inner.embed(texts)


def test_a_file_that_fails_to_embed_or_write_loses_nothing_else(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch, kbmcp: Callable[..., Run]
) -> None:
    files = {**good_files(20), "bad-embed.md": "# Poison\n\npoison ivy\n"}
    files["bad-write.md"] = "# Cursed\n\nwrites fail\n"
    root = write_tree(tmp_path / "docs", files)
    real_add_to_index = sqlite_index.add_to_index

    def failing_add_to_index(conn, knowledge_base_id, title, rows):  # type: ignore[no-untyped-def]
        if title == "Cursed":
            raise RuntimeError("a bug in writing this one document")
        return real_add_to_index(conn, knowledge_base_id, title, rows)

    monkeypatch.setattr(sqlite_index, "add_to_index", failing_add_to_index)
    settings = Settings(db=db_path, embedder="hash")
    with Workspace(settings, embedder=PoisonEmbedder()) as workspace:
        report = add_paths(workspace, workspace.local_principal(), [root])
        assert report.added == 20
        assert report.skipped == {"failed (see errors)": 2}
        assert sorted(report.errors) == [
            f"{root / 'bad-embed.md'}: not indexed (ValueError: the model cannot take this text)",
            f"{root / 'bad-write.md'}: not indexed (RuntimeError: a bug in writing this one "
            "document)",
        ]
        paths = indexed_paths(workspace)
        assert len(paths) == 20 and "bad-embed.md" not in paths and "bad-write.md" not in paths
        # the failed write left nothing behind: no document, revision or chunk row
        orphans = workspace.conn.execute(
            "SELECT count(*) FROM chunk AS c JOIN revision AS r ON r.id = c.revision_id "
            "WHERE r.content LIKE '%writes fail%'"
        ).fetchone()[0]
        assert orphans == 0
    monkeypatch.setattr(sqlite_index, "add_to_index", real_add_to_index)
    # once the cause is gone, the next add indexes them (exit status 1 while files fail)
    monkeypatch.setenv("KBMCP_DB", str(db_path))
    run = kbmcp("add", root, "--json")
    assert run.code == 0, run.err
    assert run.json()["added"] == 2  # type: ignore[index]


def test_a_broken_embedder_is_an_error_not_a_failure_per_file(
    tmp_path: Path, db_path: Path
) -> None:
    root = write_tree(tmp_path / "docs", {"a.md": "# A\n\npoison\n", "b.md": "# B\n\npoison\n"})
    settings = Settings(db=db_path, embedder="hash")
    with (
        Workspace(settings, embedder=PoisonEmbedder()) as workspace,
        pytest.raises(ValueError, match="cannot take"),
    ):
        add_paths(workspace, workspace.local_principal(), [root])


@pytest.mark.parametrize(
    ("arguments", "option"),
    [
        (["add", "DOCS", "--kb", "x" + os.fsdecode(b"\xe9")], "'--kb'"),
        (["add", "DOCS", "--tag", "k=" + os.fsdecode(b"\xe9")], "'--tag'"),
        (["add", "DOCS", "--meta", "k=" + os.fsdecode(b"\xe9")], "'--meta'"),
        (["add", "DOCS", "--exclude", os.fsdecode(b"\xe9")], "'--exclude'"),
        (["--db", os.fsdecode(b"k\xe9.db"), "add", "DOCS"], "'--db'"),
        (["add", "DOCS/" + LATIN1_NAME], "'PATHS...'"),
        (["watch", "DOCS/" + LATIN1_NAME], "'FOLDERS...'"),
    ],
)
def test_arguments_that_are_not_utf8_are_a_usage_error(
    tmp_path: Path, kbmcp: Callable[..., Run], arguments: list[str], option: str
) -> None:
    root = write_tree(tmp_path / "docs", {"a.md": "# A\n"})
    (root / LATIN1_NAME).write_bytes(b"# x\n")
    run = kbmcp(*[argument.replace("DOCS", str(root)) for argument in arguments])
    assert run.code == 2
    assert_one_line_error(run, option, "UTF-8", "byte 0xe9")
    assert not (tmp_path / os.fsdecode(b"k\xe9.db")).exists()
