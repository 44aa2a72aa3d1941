"""The command line speaks in its own flags: errors and notes name the flag the user typed
(`--path`, not `document_paths`), the same kind of usage mistake exits with the same status
(2, as click's own), and `--help` shows the ranges of the numeric options."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from kbmcp.cli.flags import FLAGS, in_flags
from tests.cli_support import Run, assert_one_line_error
from tests.mcp_support import write

# Service argument names a CLI user never typed: none may appear in an error or note.
SERVICE_NAMES = re.compile(r"\b(" + "|".join(name for name in FLAGS if "_" in name) + r")\b")


@pytest.fixture
def db(tmp_path: Path, kbmcp: Callable[..., Run]) -> Path:
    folder = write(tmp_path / "notes", {"restore.md": "# Restore\n\nRestore the backup.\n"})
    db = tmp_path / "kb.db"
    assert kbmcp("--db", db, "add", folder, "--kb", "notes").code == 0
    return db


def document_id(kbmcp: Callable[..., Run], db: Path) -> str:
    listing = kbmcp("--db", db, "ls", "notes", "--json").json()
    return str(listing["documents"][0]["document_id"])  # type: ignore[index]


def test_a_filter_that_matched_nothing_is_named_by_its_flag(
    kbmcp: Callable[..., Run], db: Path
) -> None:
    found = kbmcp("--db", db, "search", "restore", "--path", "nonexistent/")
    assert found.code == 0
    assert found.out == "no results (filters that matched nothing: --path)\n"
    both = kbmcp("--db", db, "search", "restore", "--path", "nope/", "--tag", "team=ops")
    assert "matched nothing: --path, --tag" in both.out
    # --json is the service's response, as the MCP tool's: its own names
    as_json = kbmcp("--db", db, "search", "restore", "--path", "nope/", "--json").json()
    assert as_json["stats"]["filters_unmatched"] == ["document_paths"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["search", "restore", "--alpha", "2"], "--alpha"),  # click's range
        (["search", "restore", "--alpha", "nan"], "--alpha"),  # the service's check
        (["search", "restore", "--min-similarity", "3"], "--min-similarity"),
        (["search", "restore", "--limit", "0"], "--limit"),
        (["search", "restore", "--half-life", "-1"], "--half-life"),
        (["search", "restore", "--alpha", "0.3", "--mode", "lexical"], "--alpha"),
        (["search", "restore", "--alpha", "0.3", "--rrf-k", "5"], "--rrf-k"),
        (["search", "restore", "--doc", "doc_nothex"], "--doc"),
        (["search", "restore", "--path", ""], "--path"),
        (["search", "  "], "QUERY"),
        (["read", "doc_nothex"], "DOCUMENT_ID"),
        (["read", "doc_0123456789abcdef", "--revision", "rev_x"], "--revision"),
        (["read", "doc_0123456789abcdef", "--limit-chars", "0"], "--limit-chars"),
        (["ls", "--limit", "0"], "--limit"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else value,
)
def test_a_bad_value_is_a_usage_error_naming_the_flag(
    kbmcp: Callable[..., Run], db: Path, args: list[str], flag: str
) -> None:
    run = kbmcp("--db", db, *args)
    assert_one_line_error(run, flag)
    assert run.code == 2, run.err
    assert not SERVICE_NAMES.search(run.err), run.err


def test_what_is_not_a_usage_mistake_exits_1_and_still_names_the_flag(
    kbmcp: Callable[..., Run], db: Path
) -> None:
    unknown = kbmcp("--db", db, "search", "restore", "--doc", "doc_0123456789abcdef")
    assert_one_line_error(unknown, "--doc: doc_0123456789abcdef")
    assert unknown.code == 1 and "document_ids" not in unknown.err
    missing = kbmcp("--db", db, "read", "doc_0123456789abcdef")
    assert_one_line_error(missing, "does not exist")
    assert missing.code == 1


@pytest.mark.parametrize(
    ("option", "shown"),
    [("--alpha", "[0.0<=x<=1.0]"), ("--min-similarity", "[-1.0<=x<=1.0]"), ("--limit", "x>=1]")],
)
def test_search_help_shows_the_ranges(kbmcp: Callable[..., Run], option: str, shown: str) -> None:
    help_text = kbmcp("search", "--help").out
    # the option's entry runs from its line to the next option's
    entry = help_text.split(f"  {option} ", 1)[1].split("\n  --", 1)[0]
    assert shown in " ".join(entry.split()), entry


def test_names_are_replaced_as_whole_words_only() -> None:
    assert in_flags("limit_chars and limit: rate-limit", ["limit"]) == (
        "limit_chars and --limit: rate-limit"
    )
    assert in_flags("document_ids: x; knowledge_ids", ["document_ids", "knowledge_ids"]) == (
        "--doc: x; --doc"
    )
    assert in_flags("alpha", []) == "alpha"
