"""The `kbmcp` command line, driven through its real entry point (`kbmcp.cli.main`) in-process
and, for a few end-to-end cases, as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from kbmcp.cli import cli
from kbmcp.embed.base import ModelFingerprint
from kbmcp.embed.hashing import HashingEmbedder
from tests import processes
from tests.cli_support import assert_one_line_error
from tests.store_backends import is_postgres

PINNED_NOW = "2026-01-01T00:00:00Z"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small fixed corpus (its ids are deterministic: they derive from knowledge base + path)."""
    folder = tmp_path / "corpus"
    (folder / "guides").mkdir(parents=True)
    (folder / "README.md").write_text(
        "---\ntitle: Project Readme\ntags: [intro]\nowner: docs-team\n---\n"
        "# Readme\n\nThis project keeps notes about herons.\n\n## Install\n\nRun the installer.\n"
    )
    (folder / "guides" / "keys.md").write_text(
        "# Rotating keys\n\nRotate API keys every ninety days.\n"
    )
    (folder / "notes.txt").write_text("Plain text notes.\nSecond line.\n")
    return folder


@pytest.fixture
def db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Path | str:
    """The database the commands run on: a new file, or a new PostgreSQL database."""
    if backend == "postgres":
        return str(request.getfixturevalue("new_postgres_url"))
    return tmp_path / "cli.db"


@pytest.fixture
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBMCP_NOW", PINNED_NOW)


def document_id(kbmcp, db: Path, path: str) -> str:
    listing = kbmcp("--db", db, "ls", "--all", "--json").json()
    return next(doc["document_id"] for doc in listing["documents"] if doc["path"] == path)


# --------------------------------------------------------------------------- help and options


def test_help_works_for_every_command(kbmcp) -> None:
    top = kbmcp("--help")
    assert top.code == 0 and "Usage: kbmcp" in top.out
    assert {"add", "ls", "read", "reembed", "doctor"} <= set(cli.commands)
    for name in cli.commands:
        run = kbmcp(name, "--help")
        assert run.code == 0, name
        assert f"Usage: kbmcp {name}" in run.out
        assert run.err == ""
    assert kbmcp("--version").out.strip() == "kbmcp, version 0.1.0"


def test_db_option_takes_precedence_over_the_environment(
    kbmcp,
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env_db, flag_db = tmp_path / "env.db", tmp_path / "flag.db"
    monkeypatch.setenv("KBMCP_DB", str(env_db))
    assert kbmcp("--db", flag_db, "add", corpus).code == 0
    listed = kbmcp("--db", flag_db, "ls", "--json").json()["knowledge_bases"]
    assert listed[0]["document_count"] == 3
    # KBMCP_DB names a different file that does not exist: reading commands do not create it.
    assert_one_line_error(kbmcp("ls", "--json"), "no knowledge-base file", str(env_db))
    assert not env_db.exists()
    assert_one_line_error(kbmcp("doctor", "--json"), "no knowledge-base file", str(env_db))
    assert not env_db.exists()
    assert kbmcp("--db", flag_db, "doctor", "--json").json()["db_path"] == str(flag_db)


def test_without_db_option_or_env_the_user_data_dir_is_used(
    kbmcp,
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KBMCP_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    expected = tmp_path / "xdg" / "kbmcp" / "kbmcp.db"
    assert_one_line_error(kbmcp("doctor", "--json"), "no knowledge-base file", str(expected))
    assert kbmcp("add", corpus).code == 0
    assert kbmcp("doctor", "--json").json()["db_path"] == str(expected)
    assert expected.exists()


# --------------------------------------------------------------------------- commands


def test_add_ls_and_read_in_text(kbmcp, corpus: Path, db: Path) -> None:
    first = kbmcp("--db", db, "add", corpus, "--kb", "notes", "--tag", "team=search")
    assert first.code == 0 and first.err == ""
    assert first.out.startswith("notes: added 3, updated 0, unchanged 0, archived 0, skipped 0;")
    again = kbmcp("--db", db, "add", corpus, "--kb", "notes", "--tag", "team=search")
    assert "added 0, updated 0, unchanged 3" in again.out and "(0 embedded)" in again.out

    kbs = kbmcp("--db", db, "ls")
    assert kbs.code == 0 and "notes  3 documents" in kbs.out
    docs = kbmcp("--db", db, "ls", "notes")
    assert {line.split()[1] for line in docs.out.splitlines()} == {
        "notes.txt",
        "guides/keys.md",
        "README.md",
    }
    readme = next(line for line in docs.out.splitlines() if " README.md " in line)
    assert readme.endswith("Z  Project Readme")  # the title as it reads, last, not a repr
    tagged = kbmcp("--db", db, "ls", "notes", "--tag", "tag=intro")
    assert [line.split()[1] for line in tagged.out.splitlines()] == ["README.md"]

    doc = document_id(kbmcp, db, "guides/keys.md")
    read = kbmcp("--db", db, "read", doc)
    assert read.code == 0 and read.out == "# Rotating keys\n\nRotate API keys every ninety days.\n"
    window = kbmcp("--db", db, "read", doc, "--offset", "2", "--limit-chars", "8")
    assert window.out == "Rotating\n"
    assert "continue with --offset 10" in window.err


def test_edit_then_read_an_old_revision(kbmcp, corpus: Path, db: Path) -> None:
    kbmcp("--db", db, "add", corpus)
    doc = document_id(kbmcp, db, "notes.txt")
    old = kbmcp("--db", db, "read", doc, "--json").json()
    (corpus / "notes.txt").write_text("Rewritten notes.\n")
    assert "updated 1" in kbmcp("--db", db, "add", corpus).out
    new = kbmcp("--db", db, "read", doc, "--json").json()
    assert new["revision_number"] == 2 and new["content"] == "Rewritten notes.\n"
    back = kbmcp("--db", db, "read", doc, "--revision", old["revision_id"], "--json").json()
    assert back["content"] == "Plain text notes.\nSecond line.\n"
    assert back["is_current_revision"] is False


def test_prune_from_the_cli(kbmcp, corpus: Path, db: Path) -> None:
    kbmcp("--db", db, "add", corpus)
    (corpus / "notes.txt").unlink()
    run = kbmcp("--db", db, "add", corpus, "--prune", "--json")
    assert run.json()["archived"] == 1
    listed = kbmcp("--db", db, "ls", "default", "--archived")
    assert "[archived]" in listed.out


def test_json_outputs(kbmcp, corpus: Path, db: Path) -> None:
    report = kbmcp("--db", db, "add", corpus, "--json", "--meta", "origin=test").json()
    assert report["added"] == 3 and report["chunks_indexed"] == report["chunks_embedded"] > 0
    assert set(report) >= {"knowledge_base_id", "skipped", "seconds", "warnings", "errors"}
    doctor = kbmcp("--db", db, "doctor", "--json").json()
    assert doctor["counts"]["documents"] == 3
    assert doctor["schema_version"] == doctor["schema_latest"]
    if is_postgres(db):
        assert doctor["hnsw_index"] in (True, False)  # a server's facts, not a file's
    else:
        assert doctor["journal_mode"] == "wal"
    assert doctor["model"]["ok"] is True
    assert doctor["recorded_model"]["name"] == "hashing"
    reembedded = kbmcp("--db", db, "reembed", "--json").json()
    assert reembedded["chunks"] == report["chunks_indexed"]
    assert reembedded["model"] == reembedded["previous_model"]


def test_doctor_and_reembed_in_text(kbmcp, corpus: Path, db: Path) -> None:
    kbmcp("--db", db, "add", corpus)
    doctor = kbmcp("--db", db, "doctor")
    assert doctor.code == 0
    lines = doctor.out.splitlines()
    assert lines[0].startswith("kbmcp 0.1.0 on Python ")
    assert f"database: {db}" in lines
    assert "model: ok: hashing (dimension 384, version 1), loaded in " in doctor.out
    assert "contents: 1 knowledge base, 3 documents, 0 archived documents, " in doctor.out
    for repr_mark in ("{", "}", "['", "':", "True", "False", "None"):  # words, no reprs
        assert repr_mark not in doctor.out, repr_mark
    reembed = kbmcp("--db", db, "reembed")
    assert reembed.code == 0 and reembed.out.startswith("re-embedded ")
    assert "chunks with hashing" in reembed.out


def test_doctor_in_text_names_a_model_mismatch(
    kbmcp, corpus: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kbmcp("--db", db, "add", corpus)
    other = ModelFingerprint(name="other-model", dimension=384, version="2")
    monkeypatch.setattr(HashingEmbedder, "fingerprint", property(lambda self: other))
    doctor = kbmcp("--db", db, "doctor")
    assert doctor.code == 1
    assert "model: NOT OK: the configured model differs from the recorded one" in doctor.out
    holder = "the database" if is_postgres(db) else "the file"
    assert (
        f"  configured: other-model (dimension 384, version 2); recorded in {holder}: "
        "hashing (dimension 384, version 1)"
    ) in doctor.out.splitlines()


def test_snapshot_of_listings_and_a_read(
    kbmcp,
    corpus: Path,
    db: Path,
    pinned_clock: None,
    snapshot_json: SnapshotAssertion,
) -> None:
    kbmcp("--db", db, "add", corpus, "--kb", "handbook")
    assert kbmcp("--db", db, "ls", "--json").json() == snapshot_json(name="knowledge_bases")
    assert kbmcp("--db", db, "ls", "handbook", "--json").json() == snapshot_json(name="documents")
    doc = document_id(kbmcp, db, "README.md")
    read = kbmcp("--db", db, "read", doc, "--limit-chars", "60", "--json").json()
    # Where the text came from: the file's absolute path (under this test's temporary folder).
    assert read.pop("source") == str((corpus / "README.md").resolve())
    assert read == snapshot_json(name="read_window")


# --------------------------------------------------------------------------- errors


def test_errors_are_one_line_with_a_nonzero_exit(
    kbmcp,
    corpus: Path,
    db: Path,
    tmp_path: Path,
) -> None:
    kbmcp("--db", db, "add", corpus)
    assert_one_line_error(kbmcp("--db", db, "add", tmp_path / "nope"), "no such file or folder")
    assert_one_line_error(kbmcp("--db", db, "read", "doc_123"), "not a valid document id")
    assert_one_line_error(
        kbmcp("--db", db, "read", "doc_0123456789abcdef"), "does not exist or is not readable"
    )
    assert_one_line_error(
        kbmcp("--db", db, "add", corpus, "--tag", "no-equals-sign"), "--tag expects key=value"
    )
    assert_one_line_error(kbmcp("--db", db, "add", corpus, "--meta", "=x"), "--meta expects")
    assert_one_line_error(kbmcp("--db", db, "ls", "no-such-kb"), "no-such-kb")
    assert_one_line_error(kbmcp("--db", db, "add", corpus, "--kb", " "), "must not be empty")
    assert_one_line_error(kbmcp("--db", db, "read"), "Missing argument", "kbmcp read --help")
    assert_one_line_error(kbmcp("--db", db, "frobnicate"), "No such command")
    assert_one_line_error(kbmcp("--db", db, "ls", "--limit", "0"), "--limit")
    assert_one_line_error(kbmcp("--db", tmp_path, "ls"), "is a directory")


@pytest.mark.sqlite_only("file: damaged, foreign and missing files")
def test_unusable_database_files_are_one_line_errors(
    kbmcp,
    corpus: Path,
    db: Path,
    tmp_path: Path,
) -> None:
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("just some text\n" * 50)
    assert_one_line_error(kbmcp("--db", not_a_db, "ls"), "not a kbmcp database")
    kbmcp("--db", db, "add", corpus)  # the last connection to close folds the WAL into the file
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(db.read_bytes()[:1024])
    assert_one_line_error(kbmcp("--db", damaged, "ls"), "is damaged")
    assert_one_line_error(
        kbmcp("--db", not_a_db / "kb.db", "add", corpus), "cannot create the folder"
    )


def test_another_embedding_model_is_refused_until_reembed(
    kbmcp,
    corpus: Path,
    db: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert kbmcp("--db", db, "add", corpus).code == 0  # built with the hashing embedder
    monkeypatch.setenv("KBMCP_EMBEDDER", "minilm")
    assert_one_line_error(kbmcp("--db", db, "add", corpus), "kbmcp reembed", "hashing")
    doctor = kbmcp("--db", db, "doctor", "--json")
    assert doctor.code == 1 and "kbmcp reembed" in doctor.json()["model"]["error"]
    assert kbmcp("--db", db, "reembed").code == 0
    assert kbmcp("--db", db, "doctor", "--json").json()["model"]["ok"] is True
    assert "unchanged 3" in kbmcp("--db", db, "add", corpus).out


def test_a_bad_environment_setting_is_a_one_line_error(
    kbmcp,
    db: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KBMCP_EMBEDDER", "word2vec")
    assert_one_line_error(kbmcp("--db", db, "ls"), "KBMCP_EMBEDDER")


# --------------------------------------------------------------------------- subprocess


def run_kbmcp(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, "-m", "kbmcp", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_end_to_end_as_a_subprocess(corpus: Path, db: Path) -> None:
    env = {**os.environ, "KBMCP_EMBEDDER": "hash", "KBMCP_DB": str(db)}
    added = run_kbmcp("add", corpus, "--json", env=env)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["added"] == 3
    listing = json.loads(run_kbmcp("ls", "--all", "--json", env=env).stdout)
    doc = next(d["document_id"] for d in listing["documents"] if d["path"] == "notes.txt")
    read = run_kbmcp("read", doc, env=env)
    assert (read.returncode, read.stdout) == (0, "Plain text notes.\nSecond line.\n")
    bad = run_kbmcp("read", "doc_nothex", env=env)
    assert bad.returncode == 2 and bad.stdout == ""  # a malformed value: a usage mistake
    assert bad.stderr.count("\n") == 1 and "DOCUMENT_ID: 'doc_nothex' is not a valid" in bad.stderr
    usage = run_kbmcp("add", env=env)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr + usage.stderr


# ------------------------------------------------------------- add: selection, dry run, progress


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
    kbmcp, folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "never.db"
    dry = kbmcp("--db", db, "add", folder, "--dry-run")
    assert (dry.code, dry.err) == (0, "")
    assert dry.out.splitlines() == [
        "index  guide.md  (markdown, 1 chunk)",
        "skip   tool.py  (code or config (use --code))",
        "skip   yarn.lock  (lock file)",
        "skip   img/logo.svg  (image)",
        "would index 1 file (1 chunk), skip 3 "
        "(code or config (use --code) 1, image 1, lock file 1)",
    ]
    assert not db.exists()
    preview = kbmcp("add", folder, "--dry-run", "--code", "--exclude", "img/", "--json").json()
    assert [f["path"] for f in preview["files"]] == ["guide.md", "tool.py"]
    assert preview["skipped_by_reason"] == {"excluded (--exclude)": 1, "lock file": 1}


def test_add_with_include_and_the_summary_counts_by_reason(
    kbmcp, folder: Path, tmp_path: Path
) -> None:
    added = kbmcp("--db", tmp_path / "kb.db", "add", folder, "--include", "*.py")
    assert (added.code, added.err) == (0, "")  # not a terminal: no progress drawn
    assert added.out.startswith(
        "default: added 1, updated 0, unchanged 0, archived 0, skipped 3 "
        "(not matched by --include 3);"
    )
    assert len(added.out.splitlines()) == 1


def test_an_empty_glob_is_a_one_line_error(kbmcp, folder: Path) -> None:
    failed = kbmcp("add", folder, "--exclude", "")
    assert_one_line_error(failed, "--exclude expects a glob pattern, got an empty string")
    assert_one_line_error(kbmcp("watch", folder, "--include", " "), "--include expects a glob")
