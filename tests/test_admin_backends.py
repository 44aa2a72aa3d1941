"""`kbmcp doctor` and `kbmcp reembed` on both backends (issue 18): the doctor reports the same
counts, model and ids of a corpus in an SQLite file and in its PostgreSQL copy, with the server's
facts in place of the file's; reembed switches every vector to another model on both, with the
same vectors, and catches documents another writer changes while it embeds."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbmcp.cli.doctor_lines import doctor_lines
from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import ModelMismatch, StoreError
from kbmcp.search.models import SearchRequest
from kbmcp.service import reembed as reembed_service
from kbmcp.service.admin import doctor, reembed
from kbmcp.service.ingest import DocumentInput, add_documents, archive_document
from kbmcp.service.search import search
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace
from tests.backend_state import catalog_state, index_state
from tests.backend_twins import twin_workspaces
from tests.cli_support import Run

# The report's keys on SQLite, in order; PostgreSQL has its facts in the same places.
SQLITE_KEYS = [
    "kbmcp", "python", "platform", "sqlite", "apsw", "sqlite_vec", "mcp", "db_path",
    "schema_version", "schema_latest", "journal_mode", "recorded_model", "configured_embedder",
    "counts", "id_key", "warnings", "model",
]  # fmt: skip
POSTGRES_IN_PLACE = {
    "sqlite": "postgresql",
    "apsw": "pgvector",
    "sqlite_vec": "psycopg",
    "journal_mode": "hnsw_index",
}
BACKEND_FACTS = {"db_path", "schema_version", "schema_latest", *POSTGRES_IN_PLACE}
VERSION = re.compile(r"^\d+(\.\d+)*")


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[Workspace, Workspace]]:
    yield from twin_workspaces(tmp_path_factory.mktemp("admin"), postgres_url)


def without_timing(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "model": {**report["model"], "load_seconds": None}}


# --------------------------------------------------------------------------- doctor


def test_doctor_reports_the_same_corpus_with_the_server_facts_in_place_of_the_file_facts(
    twins: tuple[Workspace, Workspace],
) -> None:
    sqlite, pg = twins
    on_file = without_timing(doctor(sqlite, sqlite.local_principal()))
    on_server = without_timing(doctor(pg, pg.local_principal()))
    assert list(on_file) == SQLITE_KEYS
    assert list(on_server) == [POSTGRES_IN_PLACE.get(key, key) for key in SQLITE_KEYS]
    for key in set(SQLITE_KEYS) - BACKEND_FACTS:
        assert on_server[key] == on_file[key], key
    counts = on_file["counts"]
    assert all(counts[key] > 0 for key in counts), counts  # the corpus has a row of each kind
    assert on_file["id_key"] is not None and on_file["model"]["ok"] is True

    from kbmcp.store.postgres.migrations import latest_version

    assert on_server["schema_version"] == on_server["schema_latest"] == latest_version()
    assert on_server["db_path"] == pg.store.shown
    assert on_server["hnsw_index"] is True  # built by the copy
    assert VERSION.match(on_server["postgresql"]) and VERSION.match(on_server["pgvector"])
    server_version = pg.conn.execute("SHOW server_version").fetchone()[0]
    assert on_server["postgresql"] == server_version
    import psycopg

    assert on_server["psycopg"] == psycopg.__version__
    assert on_server["warnings"] == []  # a server's files are not kbmcp's to check


def test_doctor_in_words_on_postgresql(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    on_file = doctor_lines(doctor(sqlite, sqlite.local_principal()))
    on_server = doctor_lines(doctor(pg, pg.local_principal()))
    report = doctor(pg, pg.local_principal())
    assert on_server[1] == (
        f"libraries: PostgreSQL {report['postgresql']}, pgvector {report['pgvector']}, "
        f"psycopg {report['psycopg']}, mcp {report['mcp']}"
    )
    assert on_server[2] == f"database: {pg.store.shown}"
    version = report["schema_version"]
    assert on_server[3] == (
        f"schema: version {version} (latest {version}), HNSW vector index present"
    )
    assert on_server[4].startswith("model: ok: hashing (dimension 384, version 1), loaded in ")
    assert on_server[4].endswith("; the database's vectors were made with it")
    assert on_server[5:] == on_file[5:]  # embedder setting, contents, id key
    assert any(line.startswith("contents: ") for line in on_server)
    for repr_mark in ("{", "}", "['", "':", "True", "False", "None"):  # words, no reprs
        assert not any(repr_mark in line for line in on_server), repr_mark


def test_kbmcp_doctor_on_a_postgresql_url(
    twins: tuple[Workspace, Workspace],
    postgres_url: str,
    kbmcp: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = kbmcp("--db", postgres_url, "doctor", "--json")
    assert run.code == 0, run.err
    report = run.json()
    assert report["counts"] == doctor(twins[0], twins[0].local_principal())["counts"]
    assert report["hnsw_index"] is True and report["model"]["ok"] is True
    text = kbmcp("--db", postgres_url, "doctor")
    assert text.code == 0 and text.err == ""
    assert "HNSW vector index present" in text.out


# --------------------------------------------------------------------------- reembed

TREE = {
    "herons.md": "# Herons\n\nHerons wait in shallow water.\n\n## Nests\n\nThey nest in trees.\n",
    "owls.md": "# Owls\n\nOwls hunt at night.\n",
    "gulls.md": "# Gulls\n\nGulls steal chips on the pier.\n",
    "swifts.md": "# Swifts\n\nSwifts sleep while flying.\n",
}


def documents() -> list[DocumentInput]:
    return [DocumentInput(path, text) for path, text in TREE.items()]


@pytest.fixture
def both(tmp_path: Path, fresh_postgres_url: str) -> list[Path | str]:
    """An SQLite file and a PostgreSQL database holding the same documents (one archived),
    written by the same calls (ids equal)."""
    databases: list[Path | str] = [tmp_path / "kb.db", fresh_postgres_url]
    for db in databases:
        with Workspace(
            Settings(db=db, embedder="hash"), embedder=HashingEmbedder(), create=True
        ) as ws:
            principal = ws.local_principal()
            add_documents(ws, principal, "birds", documents())
            archive_document(ws, principal, document_id(ws, "gulls.md"))
    return databases


def document_id(ws: Workspace, path: str) -> str:
    sql = "SELECT public_id FROM document WHERE path = " + (
        "?" if ws.store.kind == "sqlite" else "%s"
    )
    return str(ws.conn.execute(sql, (path,)).fetchone()[0])


def expected_vectors(ws: Workspace, embedder: HashingEmbedder) -> tuple[dict[int, bytes], set[int]]:
    """Each current chunk's vector computed from scratch by `embedder`; the published ones."""
    current = [
        tuple(row)
        for row in ws.conn.execute(
            "SELECT c.id, d.title, c.heading_path, c.text, d.status FROM document AS d "
            "JOIN chunk AS c ON c.revision_id = d.current_revision_id ORDER BY c.id"
        )
    ]
    inputs = [chunk_embedding_input(t, json.loads(h), x) for _, t, h, x, _ in current]
    vectors = embedder.embed(inputs)
    return (
        {row[0]: to_blob(vector) for row, vector in zip(current, vectors, strict=True)},
        {row[0] for row in current if row[4] == "published"},
    )


def test_reembed_switches_every_vector_to_the_configured_model_on_both(
    both: list[Path | str],
) -> None:
    other = HashingEmbedder(dimension=64)
    results, states, hits = [], [], []
    for db in both:
        with Workspace(Settings(db=db, embedder="hash"), embedder=other) as ws:
            principal = ws.local_principal()
            with pytest.raises(ModelMismatch, match="kbmcp reembed") as refused:
                add_documents(ws, principal, "birds", documents())
            assert refused.value.details["configured"]["dimension"] == 64
            result = reembed(ws, principal)
            assert ws.store.vectors.recorded_model(ws.conn) == other.fingerprint
            stored, published = expected_vectors(ws, other)
            state = index_state(ws)
            assert state["stored_vectors"] == stored  # every current chunk, archived ones too
            assert state["indexed_vectors"] == {i: stored[i] for i in sorted(published)}
            assert result["chunks"] == len(stored)
            results.append({**result, "seconds": None})
            states.append((catalog_state(ws), state))
            request = SearchRequest("swifts sleep while flying", mode="semantic", limit=3)
            hits.append([(r.path, r.score) for r in search(ws, principal, request).results])
            report = doctor(ws, principal)
            assert report["model"]["ok"] is True
            if ws.store.kind == "postgres":
                assert report["hnsw_index"] is True  # built once, after the switch
                assert vector_dimension(ws) == 64
            assert add_documents(ws, principal, "birds", documents()).unchanged == 3
    assert results[0] == results[1]
    assert results[0]["previous_model"]["dimension"] == 384
    assert states[0] == states[1]
    assert hits[0] == hits[1] and hits[0][0][0] == "swifts.md"


def vector_dimension(ws: Workspace) -> int:
    """pgvector keeps a column's dimension as its type modifier."""
    return int(
        ws.conn.execute(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'chunk_vec'::regclass AND attname = 'embedding'"
        ).fetchone()[0]
    )


class HookEmbedder(DelegatingEmbedder):
    """Runs `hook` once, at its first call (while reembed computes vectors, outside any
    transaction of its workspace), then embeds."""

    def __init__(self, hook: Callable[[], None]) -> None:
        super().__init__(HashingEmbedder(dimension=64))
        self.hook: Callable[[], None] | None = hook
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return self.inner.embed(texts)


def staging_tables(ws: Workspace) -> int:
    if ws.store.kind == "sqlite":
        sql = "SELECT count(*) FROM temp.sqlite_schema WHERE name = 'reembed_vector'"
    else:
        sql = "SELECT count(*) FROM pg_class WHERE relname = 'reembed_vector'"
    return int(ws.conn.execute(sql).fetchone()[0])


def test_reembed_catches_documents_another_writer_changes_while_it_embeds(
    both: list[Path | str],
) -> None:
    """While the vectors are computed, another process edits a document (a new revision),
    retitles one (same content: the revision and its chunks stay, their embedding input
    changes), adds one and archives one; the switch puts the right vector on every current
    chunk, computed from what the chunk is at the switch."""
    outcomes = []
    for db in both:
        settings = Settings(db=db, embedder="hash")
        model = HashingEmbedder(dimension=64)

        def another_process_writes(db: Path | str = db) -> None:
            settings = Settings(db=db, embedder="hash")
            with Workspace(settings, embedder=HashingEmbedder(dimension=384)) as other:
                principal = other.local_principal()
                # still the old model: the switch has not happened
                add_documents(
                    other,
                    principal,
                    "birds",
                    [
                        DocumentInput("herons.md", "# Herons\n\nHerons stab fish.\n"),
                        DocumentInput("owls.md", TREE["owls.md"], title="Barn owls"),
                        DocumentInput("kites.md", "# Kites\n\nKites hover over fields.\n"),
                    ],
                )
                archive_document(other, principal, document_id(other, "swifts.md"))

        embedder = HookEmbedder(another_process_writes)
        with Workspace(settings, embedder=embedder) as ws:
            result = reembed(ws, ws.local_principal())
            stored, published = expected_vectors(ws, model)
            state = index_state(ws)
            assert state["stored_vectors"] == stored
            assert state["indexed_vectors"] == {i: stored[i] for i in sorted(published)}
            assert result["chunks"] == len(stored)
            assert embedder.calls >= 2  # all, then the late ones
            assert staging_tables(ws) == 0  # this connection's alone, and gone
            titles = dict(ws.conn.execute("SELECT path, title FROM document").fetchall())
            assert titles["owls.md"] == "Barn owls"
            outcomes.append(({**result, "seconds": None}, catalog_state(ws), state))
    assert outcomes[0] == outcomes[1]


def test_a_write_between_the_last_check_and_the_switch_makes_the_switch_wait_its_turn(
    both: list[Path | str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer commits a document after reembed found nothing late and before its switch
    transaction starts: the switch sees it, changes nothing, and the next round embeds it."""
    outcomes = [reembed_with_a_write_before_the_switch(db, monkeypatch) for db in both]
    assert outcomes[0] == outcomes[1]


def reembed_with_a_write_before_the_switch(
    db: Path | str, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, Any]]:
    settings = Settings(db=db, embedder="hash")
    model = HashingEmbedder(dimension=64)
    with Workspace(settings, embedder=model) as ws:
        backend = ws.store.reembed
        real_late_chunks, real_switch = backend.late_chunks, backend.switch
        switches: list[int | None] = []

        def late_then_a_write(conn: Any, marker: int) -> Any:
            found = real_late_chunks(conn, marker)
            if not found[1] and not switches:  # the last check before the first switch
                with Workspace(settings, embedder=HashingEmbedder()) as other:
                    kites = DocumentInput("kites.md", "# Kites\n\nKites hover.\n")
                    add_documents(other, other.local_principal(), "birds", [kites])
            return found

        def counted_switch(*args: Any) -> int | None:
            switches.append(real_switch(*args))
            return switches[-1]

        with monkeypatch.context() as patched:
            patched.setattr(backend, "late_chunks", late_then_a_write)
            patched.setattr(backend, "switch", counted_switch)
            result = reembed(ws, ws.local_principal())
        assert switches[0] is None and switches[-1] == result["chunks"]
        stored, published = expected_vectors(ws, model)
        state = index_state(ws)
        assert state["stored_vectors"] == stored
        assert state["indexed_vectors"] == {i: stored[i] for i in sorted(published)}
        return {**result, "seconds": None}, state


def test_reembed_reads_the_chunks_a_page_at_a_time(
    both: list[Path | str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of two chunks: every current chunk still gets its new vector, no page is larger,
    and the progress counts up to the chunks' total."""
    monkeypatch.setattr(reembed_service, "REEMBED_PAGE", 2)
    outcomes = [reembed_in_pages(db, monkeypatch) for db in both]
    assert outcomes[0] == outcomes[1]


def reembed_in_pages(
    db: Path | str, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, Any]]:
    other = HashingEmbedder(dimension=64)
    with Workspace(Settings(db=db, embedder="hash"), embedder=other) as ws:
        backend = ws.store.reembed
        real_pages = backend.current_chunks
        pages: list[int] = []
        progress: list[tuple[int, int]] = []

        def counted(conn: Any, after: int, limit: int) -> Any:
            found = real_pages(conn, after, limit)
            pages.append(len(found))
            return found

        with monkeypatch.context() as patched:
            patched.setattr(backend, "current_chunks", counted)
            result = reembed(ws, ws.local_principal(), lambda *done: progress.append(done))
        stored, published = expected_vectors(ws, other)
        state = index_state(ws)
        assert state["stored_vectors"] == stored
        assert state["indexed_vectors"] == {i: stored[i] for i in sorted(published)}
        assert max(pages) == 2 and sum(pages) == len(stored) == result["chunks"] > 2
        assert progress[-1] == (len(stored), len(stored))
        assert [done for done, _ in progress] == sorted(done for done, _ in progress)
        return {**result, "seconds": None}, state


def test_reembed_gives_up_on_documents_that_never_stop_changing(
    both: list[Path | str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer adds a document right after every check for late chunks, so no switch
    can happen: reembed stops after REEMBED_ROUNDS checks with an error, the model and the
    vectors unchanged, the staging table gone (it used to embed late chunks for as long as the
    writer kept writing)."""
    for db in both:
        reembed_beside_a_writer_that_never_stops(db, monkeypatch)


def reembed_beside_a_writer_that_never_stops(
    db: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(db=db, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(dimension=64)) as ws:
        backend = ws.store.reembed
        real_late_chunks = backend.late_chunks
        before = index_state(ws)["stored_vectors"]
        checks: list[int] = []

        def a_write_after_each_check(conn: Any, marker: int) -> Any:
            found = real_late_chunks(conn, marker)
            checks.append(marker)
            note = DocumentInput(f"note{len(checks)}.md", f"# Note\n\nNote {len(checks)}.\n")
            with Workspace(settings, embedder=HashingEmbedder()) as other:
                add_documents(other, other.local_principal(), "birds", [note])
            return found

        with monkeypatch.context() as patched:
            patched.setattr(backend, "late_chunks", a_write_after_each_check)
            with pytest.raises(StoreError, match="kept changing"):
                reembed(ws, ws.local_principal())
        assert len(checks) == reembed_service.REEMBED_ROUNDS
        assert ws.store.vectors.recorded_model(ws.conn) == HashingEmbedder().fingerprint
        after = index_state(ws)["stored_vectors"]
        assert {i: after[i] for i in before} == before
        assert staging_tables(ws) == 0
