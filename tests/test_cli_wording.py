"""What a newcomer reads from the small commands: a read past the end says how long the document
is, `copy` and `doctor` count in the same words and numbers, `doctor` says how ids are made in
words, and the first token warns that a running HTTP server must be restarted to require it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kbmcp.ids import TEST_KEY_ENV
from tests.cli_support import Run
from tests.mcp_support import write


@pytest.fixture
def db(tmp_path: Path, kbmcp: Callable[..., Run]) -> Path:
    folder = write(tmp_path / "notes", {"a.md": "# A\n\nRestore the backup.\n"})
    db = tmp_path / "kb.db"
    assert kbmcp("--db", db, "add", folder, "--kb", "notes").code == 0
    assert kbmcp("--db", db, "remember", "Deploys freeze on Fridays").code == 0
    return db


def document_id(kbmcp: Callable[..., Run], db: Path, path: str) -> str:
    listing = kbmcp("--db", db, "ls", "notes", "--json").json()
    return next(d["document_id"] for d in listing["documents"] if d["path"] == path)  # type: ignore[index]


def test_a_read_past_the_end_says_how_long_the_document_is(
    kbmcp: Callable[..., Run], db: Path
) -> None:
    doc = document_id(kbmcp, db, "a.md")
    past = kbmcp("--db", db, "read", doc, "--offset", "99999")
    assert past.code == 0 and past.out == ""
    assert past.err == (
        "-- --offset 99999 is past the end: the document has 25 characters (offsets 0 to 24)\n"
    )
    assert kbmcp("--db", db, "read", doc, "--offset", "24").out == "\n"  # the last one


def test_copy_counts_what_doctor_counts(
    kbmcp: Callable[..., Run], db: Path, tmp_path: Path
) -> None:
    copied = kbmcp("copy", db, tmp_path / "copy.db")
    assert copied.code == 0, copied.err
    contents = next(
        line.removeprefix("contents: ")
        for line in kbmcp("--db", tmp_path / "copy.db", "doctor").out.splitlines()
        if line.startswith("contents: ")
    )
    assert contents.startswith("1 knowledge base, 1 document, 0 archived documents, 1 memory store")
    assert f": {contents}; 1 tenant, 0 tokens; counts verified, in " in copied.out


def test_doctor_says_how_ids_are_made_in_words(
    kbmcp: Callable[..., Run], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TEST_KEY_ENV)  # a file as a user makes it: a random key
    db = tmp_path / "random.db"
    assert kbmcp("--db", db, "add", write(tmp_path / "n", {"a.md": "# A\n"})).code == 0
    (line,) = [x for x in kbmcp("--db", db, "doctor").out.splitlines() if x.startswith("ids: ")]
    assert line.startswith("ids: keyed with the file's own random key, since 20")
    assert line.endswith(": an id reveals nothing about a name or content")
    assert "origin" not in line and "unkeyed" not in line and "notes none" not in line


def test_doctor_names_a_test_key_as_one(kbmcp: Callable[..., Run], db: Path) -> None:
    (line,) = [x for x in kbmcp("--db", db, "doctor").out.splitlines() if x.startswith("ids: ")]
    assert line.startswith("ids: keyed with a key pinned for tests (KBMCP_TEST_ID_KEY), since ")
    assert "anyone who knows it can compute ids" in line


def test_the_first_token_says_a_running_server_must_be_restarted(
    kbmcp: Callable[..., Run], db: Path
) -> None:
    first = kbmcp("--db", db, "token", "create", "--scope", "knowledge:read")
    assert first.code == 0
    assert "first usable token" in first.err
    assert "already running on this file serves WITHOUT authentication until it is restarted" in (
        first.err
    )
    second = kbmcp("--db", db, "token", "create", "--scope", "knowledge:read")
    assert second.code == 0 and second.err == ""  # servers started since require tokens already
