"""`kbmcp add`: --dry-run, --include/--exclude/--code, skip counts, progress on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kbmcp.cli import main
from kbmcp.cli.progress import file_progress, progress_line


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = 0
    try:
        main([str(arg) for arg in args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "img").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nText.\n")
    (root / "tool.py").write_text("print('hi')\n")
    (root / "img" / "logo.svg").write_text("<svg/>")
    (root / "yarn.lock").write_text("# lock\n")
    return root


def test_dry_run_lists_files_and_reasons_and_creates_no_database(
    capsys: pytest.CaptureFixture[str], folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "never.db"
    code, out, err = run(capsys, "--db", db, "add", folder, "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "index  guide.md  (markdown, 1 chunks)",
        "skip   tool.py  (source code (use --code))",
        "skip   yarn.lock  (lock file)",
        "skip   img/logo.svg  (image)",
        "would index 1 files (1 chunks), skip 3 (image 1, lock file 1, source code (use --code) 1)",
    ]
    assert not db.exists()
    code, out, _ = run(capsys, "add", folder, "--dry-run", "--code", "--exclude", "img/", "--json")
    preview = json.loads(out)
    assert [f["path"] for f in preview["files"]] == ["guide.md", "tool.py"]
    assert preview["skipped_by_reason"] == {"excluded (--exclude)": 1, "lock file": 1}


def test_add_with_include_and_the_summary_counts_by_reason(
    capsys: pytest.CaptureFixture[str], folder: Path, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "--db", tmp_path / "kb.db", "add", folder, "--include", "*.py")
    assert (code, err) == (0, "")  # not a terminal: no progress drawn
    assert out.startswith(
        "default: added 1, updated 0, unchanged 0, archived 0, skipped 3 "
        "(not matched by --include 3);"
    )
    assert len(out.splitlines()) == 1


def test_an_empty_glob_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], folder: Path
) -> None:
    code, out, err = run(capsys, "add", folder, "--exclude", "")
    assert code == 1 and out == ""
    assert err == "error: --exclude expects a glob pattern, got an empty string\n"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_per_file_with_an_eta_and_erases_itself() -> None:
    assert progress_line("indexing", 0, 4, 0.0) == (
        "indexing [------------------------] 0/4 files  0:00 elapsed"
    )
    assert progress_line("indexing", 1, 4, 30.0) == (
        "indexing [######------------------] 1/4 files  0:30 elapsed  ETA 1:30"
    )
    assert progress_line("indexing", 4, 4, 4000.0).endswith("4/4 files  1:06:40 elapsed")
    terminal = FakeTerminal()
    with file_progress("indexing", terminal) as progress:
        assert progress is not None
        progress(0, 2)
        progress(2, 2)
    frames = terminal.getvalue().split("\r\x1b[2K")
    assert frames[1].startswith("indexing [") and frames[2].endswith("2/2 files  0:00 elapsed")
    assert frames[-1] == ""  # the line is erased at the end: the summary stands alone
    pipe = io.StringIO()
    with file_progress("indexing", pipe) as progress:
        assert progress is None
    assert pipe.getvalue() == ""
