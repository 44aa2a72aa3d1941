"""`kbmcp export` / `kbmcp import` (kbmcp/service/export.py, import_jsonl.py): a round trip
through a JSONL file gives the same searches, exports are byte-identical (twice, and from either
backend), every line is checked before anything is written, ids are kept or made anew, vectors
of the same model are not embedded again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service import export as export_module
from kbmcp.store.sqlite.connection import open_connection
from kbmcp.workspace import Workspace
from tests.cli_support import Run
from tests.postgres_search import build_rich_corpus, every_search
from tests.store_backends import database_on


@pytest.fixture(scope="module")
def rich_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rich")
    build_rich_corpus(root / "src", root / "rich.db")
    return root / "rich.db"


@pytest.fixture
def source_db(backend: str, rich_file: Path, request: pytest.FixtureRequest) -> Path | str:
    """The rich corpus in the test's backend (a `kbmcp copy` of the file: same ids)."""
    return database_on(backend, rich_file, request)


def _export(kbmcp: Callable[..., Run], db: Path | str, out: Path, *flags: str) -> Run:
    run = kbmcp("--db", db, "export", "-o", out, *flags)
    assert run.code == 0, run.err
    return run


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("flags", [("--with-vectors", "--with-tenants"), ("--with-tenants",)])
def test_a_round_trip_gives_the_same_searches_and_the_same_bytes(
    kbmcp: Callable[..., Run], source_db: Path | str, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    exported, again = tmp_path / "kb.jsonl", tmp_path / "again.jsonl"
    run = _export(kbmcp, source_db, exported, *flags)
    assert "exported" in run.err and run.out == ""  # progress on stderr, the data in the file
    target = tmp_path / "new.db"
    imported = kbmcp("--db", target, "import", exported, "--json")
    assert imported.code == 0, imported.err
    report = imported.json()
    with_vectors = "--with-vectors" in flags
    assert (report["embedded"] == 0) == with_vectors  # type: ignore[index]
    for tenant in (None, "acme"):
        before = every_search(source_db, tenant)
        assert any(response["results"] for response in before)  # type: ignore[index]
        assert every_search(target, tenant) == before
    _export(kbmcp, target, again, *flags)
    assert again.read_bytes() == exported.read_bytes()


def test_exports_are_byte_identical_twice_and_from_either_backend(
    kbmcp: Callable[..., Run], source_db: Path | str, rich_file: Path, tmp_path: Path
) -> None:
    flags = ("--with-vectors", "--with-tenants")
    first, second, from_file = (tmp_path / name for name in ("1.jsonl", "2.jsonl", "f.jsonl"))
    _export(kbmcp, source_db, first, *flags)
    _export(kbmcp, source_db, second, *flags)
    _export(kbmcp, rich_file, from_file, *flags)
    assert first.read_bytes() == second.read_bytes() == from_file.read_bytes()
    lines = _lines(first)
    assert lines[0] == {
        "type": "kbmcp_export",
        "format": 1,
        "with_vectors": True,
        "with_tenants": True,
        "model": {"name": "hashing", "dimension": 384, "version": lines[0]["model"]["version"]},
    }
    kinds = [line["type"] for line in lines]
    assert kinds[-1] == "end" and lines[-1]["counts"]["vector"] == kinds.count("vector")
    assert {"tenant", "knowledge_base", "memory_store", "document", "memory", "revision",
            "vector", "share"} <= set(kinds)  # fmt: skip
    assert any(line.get("status") == "archived" for line in lines)  # a forgotten memory
    assert any(line["type"] == "revision" and line["number"] == 2 for line in lines)
    # never a token (the corpus has one): neither its id nor its hash
    text = first.read_text(encoding="utf-8")
    conn = open_connection(rich_file, create=False)
    ((token_id, secret_hash),) = conn.execute("SELECT public_id, secret_hash FROM token")
    conn.close()
    assert token_id not in text and secret_hash not in text and "token" not in set(kinds)


def test_an_export_reads_documents_a_page_at_a_time(
    kbmcp: Callable[..., Run],
    source_db: Path | str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages of one document give the same bytes as pages of 200 (the paging loses and repeats
    nothing), and --kb chooses stores by name."""
    whole, paged, chosen = tmp_path / "whole.jsonl", tmp_path / "paged.jsonl", tmp_path / "c.jsonl"
    _export(kbmcp, source_db, whole)
    monkeypatch.setattr(export_module, "PAGE", 1)
    _export(kbmcp, source_db, paged)
    assert paged.read_bytes() == whole.read_bytes()
    _export(kbmcp, source_db, chosen, "--kb", "acme-ops", "--kb", "beta-docs")
    stores = [line["name"] for line in _lines(chosen) if line["type"] == "knowledge_base"]
    assert sorted(stores) == ["acme-ops", "beta-docs"]
    unknown = kbmcp("--db", source_db, "export", "-o", chosen, "--kb", "nope")
    assert unknown.code == 1 and "--kb: no knowledge base or memory store 'nope'" in unknown.err


def test_into_postgres_and_back(
    kbmcp: Callable[..., Run], rich_file: Path, tmp_path: Path, new_postgres_url: str
) -> None:
    exported, back = tmp_path / "kb.jsonl", tmp_path / "back.jsonl"
    _export(kbmcp, rich_file, exported, "--with-tenants")
    run = kbmcp("--db", new_postgres_url, "import", exported)
    assert run.code == 0, run.err
    assert run.out.startswith("imported ")
    _export(kbmcp, new_postgres_url, back, "--with-tenants")
    assert back.read_bytes() == exported.read_bytes()
    assert every_search(new_postgres_url, "acme") == every_search(rich_file, "acme")


def _count_rows(db: Path | str) -> dict[str, int]:
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        return ws.store.admin.counts(ws.conn)


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        ("document", lambda d: d.pop("path"), "path: Field required"),
        ("document", lambda d: d.update(status="deleted"), "status: Input should be 'published'"),
        ("revision", lambda d: d["chunks"][0].update(char_end=10**9), "chunks.0: chars"),
        ("revision", lambda d: d.update(document="doc_0000000000000000"), "document: doc_"),
        ("end", lambda d: d["counts"].update(document=1), "the counts differ"),
    ],
)
def test_a_bad_line_stops_the_import_before_any_write(
    kbmcp: Callable[..., Run],
    backend_db: Path | str,
    rich_file: Path,
    tmp_path: Path,
    kind: str,
    change: Callable[[dict[str, Any]], object],
    message: str,
) -> None:
    exported = tmp_path / "kb.jsonl"
    _export(kbmcp, rich_file, exported)
    lines = _lines(exported)
    # a revision of a document after the first (its store's first lines are written already)
    second = [i for i, line in enumerate(lines) if line["type"] == "document"][1]
    index = {"document": second, "revision": second + 1, "end": len(lines) - 1}[kind]
    change(lines[index])
    number = index + 1
    bad = _write_lines(tmp_path / "bad.jsonl", lines)
    assert kbmcp("--db", backend_db, "tenant", "create", "someone").code == 0
    before = _count_rows(backend_db)
    run = kbmcp("--db", backend_db, "import", bad)
    assert run.code == 1 and f"error: line {number}: {message}" in run.err, run.err
    assert "nothing was imported" in run.err and "Traceback" not in run.err
    assert _count_rows(backend_db) == before


def test_a_file_that_is_not_an_export_is_refused_naming_the_line(
    kbmcp: Callable[..., Run], tmp_path: Path, rich_file: Path
) -> None:
    exported = tmp_path / "kb.jsonl"
    _export(kbmcp, rich_file, exported)
    text = exported.read_text(encoding="utf-8").splitlines(keepends=True)
    cases = {
        "cut.jsonl": ("".join(text[:-1]), f"line {len(text) - 1}: the file ends without"),
        "garbage.jsonl": ("".join([text[0], "{not json\n", *text[1:]]), "line 2: not valid JSON"),
        "empty.jsonl": ("", "line 1: the file is empty"),
        "future.jsonl": (text[0].replace('"format":1', '"format":2'), "format 2: this kbmcp"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        target = tmp_path / f"{name}.db"
        run = kbmcp("--db", target, "import", tmp_path / name)
        assert run.code == 1 and message in run.err, (name, run.err)
        assert not target.exists(), "a failed import leaves no new file behind"


def test_ids_that_exist_need_new_ids(
    kbmcp: Callable[..., Run], backend_db: Path | str, rich_file: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "kb.jsonl"
    _export(kbmcp, rich_file, exported, "--kb", "acme-ops")
    assert kbmcp("--db", backend_db, "import", exported).code == 0
    renamed = _lines(exported)
    for line in renamed:
        if line["type"] == "knowledge_base":
            line["name"] = "acme-ops-2"
    copy = _write_lines(tmp_path / "copy.jsonl", renamed)
    refused = kbmcp("--db", backend_db, "import", copy)
    assert refused.code == 1 and "already exists" in refused.err and "--new-ids" in refused.err
    same_name = kbmcp("--db", backend_db, "import", exported, "--new-ids")
    assert same_name.code == 1 and "already has a knowledge base" in same_name.err
    made = kbmcp("--db", backend_db, "import", copy, "--new-ids", "--json")
    assert made.code == 0, made.err
    (new_kb,) = made.json()["stores"]  # type: ignore[index]
    kbs = {kb["name"]: kb["knowledge_base_id"] for kb in
           kbmcp("--db", backend_db, "kb", "list", "--json").json()}  # type: ignore[union-attr]  # fmt: skip
    assert kbs["acme-ops-2"] == new_kb != kbs["acme-ops"]
    first = _lines(tmp_path / "kb.jsonl")
    _export(kbmcp, backend_db, tmp_path / "both.jsonl")
    ids = {line.get("id") for line in _lines(tmp_path / "both.jsonl")}
    assert {line["id"] for line in first if "id" in line} <= ids  # the first import's ids kept
    audit = kbmcp("--db", backend_db, "audit", "--json").json()["events"]  # type: ignore[index]
    assert [(e["action"], e["outcome"]) for e in audit if e["action"] == "import"] == [
        ("import", "ok"),
        ("import", "invalid_request"),
        ("import", "invalid_request"),
        ("import", "ok"),
    ]


def test_vectors_of_another_model_are_embedded_again(
    kbmcp: Callable[..., Run], rich_file: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "kb.jsonl"
    _export(kbmcp, rich_file, exported, "--with-vectors")
    lines = _lines(exported)
    lines[0]["model"]["version"] = "another"
    other = _write_lines(tmp_path / "other.jsonl", lines)
    run = kbmcp("--db", tmp_path / "new.db", "import", other, "--json")
    assert run.code == 0, run.err
    report = run.json()
    vectors = sum(1 for line in lines if line["type"] == "vector")
    assert (report["vectors_used"], report["embedded"]) == (0, vectors)  # type: ignore[index]
    assert every_search(tmp_path / "new.db", None) == every_search(rich_file, None)


def test_import_reads_stdin(kbmcp: Callable[..., Run], rich_file: Path, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import io
    import sys

    exported = tmp_path / "kb.jsonl"
    _export(kbmcp, rich_file, exported)
    stdin = io.TextIOWrapper(io.BytesIO(exported.read_bytes()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    run = kbmcp("--db", tmp_path / "new.db", "import", "-")
    assert run.code == 0 and "imported" in run.out, run.err
