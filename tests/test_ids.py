"""Keyed ids (issue 16, item 4): deterministic within a file, unguessable without its key.

Before keyed ids, an id was sha256(kind, parts): a leaked memory id gave its text back by
guessing, and the ids of another tenant's objects followed from their names. `unkeyed_id` below
is that old scheme, the attacker's tool in these tests.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw
import pytest

from kbmcp.errors import StoreError
from kbmcp.ids import TEST_KEY_ENV, make_id
from kbmcp.search.request import SearchRequest
from kbmcp.service import memories
from kbmcp.service.admin import doctor
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.read import read_document
from kbmcp.service.search import search
from kbmcp.service.tenants import create_knowledge_base
from kbmcp.store.sqlite import migrations
from kbmcp.store.sqlite.connection import open_connection
from kbmcp.store.sqlite.id_key import id_key_info, id_key_of
from tests.id_support import TEST_ID_KEY
from tests.mcp_support import hash_workspace, write

ACCOUNT = "The customer's account number is {:04d}."
SECRET_ACCOUNT = 4821
CORPUS = {
    "ops/runbook.md": "# Runbook\n\nRestart the ingest worker when the queue stalls.\n",
    "notes.txt": "Plain notes about the quarterly key rotation.\n",
}
LATER_FACT = "A fact remembered after the upgrade."
SELECT_PUBLIC_IDS = """
SELECT public_id FROM tenant UNION ALL SELECT public_id FROM knowledge_base
UNION ALL SELECT public_id FROM document UNION ALL SELECT public_id FROM revision
UNION ALL SELECT public_id FROM chunk
"""


def unkeyed_id(kind: str, *parts: object) -> str:
    """The id the same row got before ids were keyed (what an attacker can compute)."""
    prefix = {"tenant": "ten", "knowledge_base": "kb", "memory_store": "mst", "memory": "mem",
              "document": "doc", "revision": "rev", "chunk": "chk"}[kind]  # fmt: skip
    text = "\x1f".join([kind, *map(str, parts)])
    return f"{prefix}_{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build(db: Path, folder: Path) -> set[str]:
    """A knowledge base of CORPUS and one memory; every public id of the file."""
    with hash_workspace(db) as ws:
        principal = ws.local_principal()
        add_paths(ws, principal, [folder], IngestOptions(knowledge_base="handbook"))
        memories.remember(ws, principal, ACCOUNT.format(SECRET_ACCOUNT))
        return {row[0] for row in ws.conn.execute(SELECT_PUBLIC_IDS)}


@pytest.fixture
def random_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files get random keys, as outside the test suite."""
    monkeypatch.delenv(TEST_KEY_ENV)


def test_a_leaked_memory_id_does_not_give_back_its_text(tmp_path: Path, random_keys: None) -> None:
    db = tmp_path / "kb.db"
    with hash_workspace(db) as ws:
        principal = ws.local_principal()
        leaked = memories.remember(ws, principal, ACCOUNT.format(SECRET_ACCOUNT))
        file_key = id_key_of(ws.conn).key
        tenant = principal.tenant_public_id
    store = leaked.memory_store_id
    guesses = {n: sha256(ACCOUNT.format(n)) for n in range(10_000)}

    def matches(make: object) -> list[int]:
        return [n for n, digest in guesses.items() if make(digest) == leaked.memory_id]  # type: ignore[operator]

    # The old scheme (and the test suite's published key) find nothing: every one of the 10,000
    # candidate texts is checked against the leaked id.
    assert matches(lambda digest: unkeyed_id("memory", store, digest, 0)) == []
    assert matches(lambda digest: make_id(TEST_ID_KEY, "memory", store, digest, 0)) == []
    # Nor can the store's or the tenant's id be computed from their names any more.
    assert store != unkeyed_id("memory_store", tenant, "memories")
    assert tenant != unkeyed_id("tenant", "local")
    # Control: with the file's key the same search finds the text, so only the key protects it.
    assert matches(lambda digest: make_id(file_key, "memory", store, digest, 0)) == [SECRET_ACCOUNT]


def test_ids_are_deterministic_within_a_file_and_differ_between_files(
    tmp_path: Path, random_keys: None
) -> None:
    folder = write(tmp_path / "docs", CORPUS)
    first = build(tmp_path / "first.db", folder)
    second = build(tmp_path / "second.db", folder)
    assert len(first) == len(second) > 10
    assert first.isdisjoint(second)  # same names, same content, other keys: no id in common
    # Within a file the same inputs give the same ids: re-adding and remembering again change
    # nothing (a new document or memory would add ids).
    assert build(tmp_path / "first.db", folder) == first
    with hash_workspace(tmp_path / "first.db") as ws:
        assert (
            memories.remember(ws, ws.local_principal(), ACCOUNT.format(SECRET_ACCOUNT)).outcome
            == "existing"
        )


def test_files_created_with_the_same_pinned_key_get_the_same_ids(tmp_path: Path) -> None:
    folder = write(tmp_path / "docs", CORPUS)
    first = build(tmp_path / "first.db", folder)
    assert build(tmp_path / "second.db", folder) == first
    assert unkeyed_id("tenant", "local") not in first


def test_a_new_file_gets_a_random_key_once(tmp_path: Path, random_keys: None) -> None:
    conn = open_connection(tmp_path / "kb.db")
    key = id_key_of(conn).key
    assert len(key) == 32 and key != TEST_ID_KEY
    info = id_key_info(conn)
    assert info is not None and (info.origin, info.unkeyed_before) == ("random", False)
    conn.close()
    assert id_key_of(open_connection(tmp_path / "kb.db")).key == key
    assert id_key_of(open_connection(tmp_path / "other.db")).key != key


def test_the_test_knob_pins_new_files_only_and_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TEST_KEY_ENV)
    existing = tmp_path / "existing.db"
    key = id_key_of(open_connection(existing)).key
    monkeypatch.setenv(TEST_KEY_ENV, TEST_ID_KEY.hex())
    # An existing file keeps its key: the knob cannot make a real file's ids guessable.
    assert id_key_of(open_connection(existing)).key == key
    pinned = tmp_path / "pinned.db"
    assert id_key_of(open_connection(pinned)).key == TEST_ID_KEY
    with hash_workspace(pinned) as ws:
        report = doctor(ws, ws.local_principal())["id_key"]
    assert report["origin"] == "pinned" and TEST_KEY_ENV in report["notes"][0]
    monkeypatch.setenv(TEST_KEY_ENV, "not hex")
    with pytest.raises(StoreError, match=TEST_KEY_ENV):
        open_connection(tmp_path / "bad.db")


def test_no_id_is_made_without_a_key(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "kb.db")
    conn.execute("DELETE FROM id_key")
    with pytest.raises(StoreError, match="no id key"):
        id_key_of(conn)
    conn.close()


# ------------------------------------------------------------------ upgrading an older file


def downgrade_to_version_6(db: Path, reference: apsw.Connection) -> None:
    """Turn a file written by this kbmcp into the file kbmcp wrote before keyed ids: every id
    rewritten to the unkeyed scheme and migrations 7 and later undone (no id_key table; the
    document.tenant_id copy and its trigger back, as in `reference`, a version 6 file)."""
    trigger = "SELECT sql FROM sqlite_schema WHERE name = 'document_owner_tenant'"
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA foreign_keys = OFF")
    with conn:
        renamed: dict[str, str] = {}
        for row_id, name in conn.execute("SELECT id, name FROM tenant").fetchall():
            renamed[f"t{row_id}"] = unkeyed_id("tenant", name)
        kbs = conn.execute("SELECT id, tenant_id, name, kind FROM knowledge_base").fetchall()
        for row_id, tenant_id, name, kind in kbs:
            id_kind = "knowledge_base" if kind == "documents" else "memory_store"
            renamed[f"k{row_id}"] = unkeyed_id(id_kind, renamed[f"t{tenant_id}"], name)
        docs = conn.execute(
            """SELECT d.id, d.knowledge_base_id, d.path, kb.kind, r.content_hash FROM document AS d
               JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
               JOIN revision AS r ON r.document_id = d.id AND r.number = 1"""
        ).fetchall()
        for row_id, kb_id, path, kind, first_hash in docs:
            if kind == "documents":
                public = unkeyed_id("document", renamed[f"k{kb_id}"], path)
            else:  # a memory: its path is its id, made from its first content
                public = unkeyed_id("memory", renamed[f"k{kb_id}"], first_hash, 0)
                conn.execute("UPDATE document SET path = ? WHERE id = ?", (public, row_id))
            renamed[f"d{row_id}"] = public
        for row_id, doc_id, number in conn.execute(
            "SELECT id, document_id, number FROM revision"
        ).fetchall():
            renamed[f"r{row_id}"] = unkeyed_id("revision", renamed[f"d{doc_id}"], number)
        for row_id, rev_id, ordinal in conn.execute(
            "SELECT id, revision_id, ordinal FROM chunk"
        ).fetchall():
            renamed[f"c{row_id}"] = unkeyed_id("chunk", renamed[f"r{rev_id}"], ordinal)
        tables = {"t": "tenant", "k": "knowledge_base", "d": "document", "r": "revision",
                  "c": "chunk"}  # fmt: skip
        for ref, public in renamed.items():
            conn.execute(
                f"UPDATE {tables[ref[0]]} SET public_id = ? WHERE id = ?", (public, int(ref[1:]))
            )
        conn.execute("DROP TABLE id_key")
        # migrations after 8 undone too (ingest's file records and revisions written in parts,
        # the audit trail)
        conn.execute("DROP TABLE IF EXISTS source_file")
        conn.execute("DROP TABLE IF EXISTS staged_revision")
        conn.execute("DROP TABLE IF EXISTS audit_event")
        conn.execute("ALTER TABLE document ADD COLUMN tenant_id INTEGER REFERENCES tenant(id)")
        conn.execute(
            "UPDATE document SET tenant_id = (SELECT kb.tenant_id FROM knowledge_base AS kb "
            "WHERE kb.id = document.knowledge_base_id)"
        )
        conn.execute(reference.execute(trigger).fetchone()[0])
        _undo_rebuilt_tables(conn, reference)
        conn.execute("PRAGMA user_version = 6")
    conn.close()


def _undo_rebuilt_tables(conn: apsw.Connection, reference: apsw.Connection) -> None:
    """Migrations 11 and 12 undone: tag and metadata rows without their store, their indexes,
    triggers and the index on paths as `reference` has them; revisions with their text before
    content_hash again (foreign keys are off: the ids stay, so references hold)."""
    older = "SELECT sql FROM sqlite_schema WHERE tbl_name = ? AND type = ? AND sql IS NOT NULL"
    conn.execute("DROP TRIGGER document_metadata_on_insert")
    conn.execute("DROP TRIGGER document_metadata_on_update")
    for table, columns in (
        ("document_tag", "document_id, key, value"),
        ("document_metadata", "document_id, key, type, value"),
        ("revision", "id, public_id, document_id, number, content, content_hash, char_count, "
                     "line_count, created_at"),
    ):  # fmt: skip
        conn.execute(f"CREATE TEMP TABLE old_{table} AS SELECT {columns} FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        for kind in ("table", "index"):
            for (sql,) in reference.execute(older, (table, kind)).fetchall():
                conn.execute(sql)
        conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM temp.old_{table}")
        conn.execute(f"DROP TABLE temp.old_{table}")
    for (sql,) in reference.execute(
        "SELECT sql FROM sqlite_schema WHERE name IN ('document_metadata_on_insert',"
        " 'document_metadata_on_update', 'document_by_path')"
    ).fetchall():
        conn.execute(sql)


def test_an_upgraded_file_keeps_its_ids_and_makes_keyed_ones_from_then_on(
    tmp_path: Path, random_keys: None
) -> None:
    folder = write(tmp_path / "docs", CORPUS)
    db = tmp_path / "old.db"
    build(db, folder)
    reference = open_connection(tmp_path / "v6.db", apply_migrations=False)
    migrations.migrate(reference, target=6)
    downgrade_to_version_6(db, reference)
    old = apsw.Connection(str(db))
    # (The vec0 table comes with the recorded model, sqlite_sequence with the first row.)
    schema = """SELECT type, name, sql FROM sqlite_schema
                WHERE tbl_name NOT IN ('chunk_vec', 'sqlite_sequence')
                  AND tbl_name NOT GLOB 'chunk_vec_*'"""
    assert sorted(old.execute(schema)) == sorted(reference.execute(schema))  # a real v6 file
    before = {row[0] for row in old.execute(SELECT_PUBLIC_IDS)}
    old.close()
    assert unkeyed_id("tenant", "local") in before

    with hash_workspace(db) as ws:  # opening it upgrades it
        conn, principal = ws.conn, ws.local_principal()
        info = id_key_info(conn)
        assert info is not None and info.unkeyed_before
        assert any("unkeyed" in note for note in doctor(ws, principal)["id_key"]["notes"])
        assert {row[0] for row in conn.execute(SELECT_PUBLIC_IDS)} == before
        ids = id_key_of(conn)

        # The same sources again: found by name and path, so nothing is added or renamed.
        report = add_paths(ws, principal, [folder], IngestOptions(knowledge_base="handbook"))
        assert (report.added, report.updated, report.unchanged) == (0, 0, 2)
        again = memories.remember(ws, principal, ACCOUNT.format(SECRET_ACCOUNT))
        assert again.outcome == "existing" and again.memory_id in before
        assert {row[0] for row in conn.execute(SELECT_PUBLIC_IDS)} == before

        # Changes get keyed ids; the rows they hang on keep theirs.
        handbook = report.knowledge_base_id
        runbook = unkeyed_id("document", handbook, "ops/runbook.md")
        write(folder, {"ops/runbook.md": CORPUS["ops/runbook.md"] + "\nThen page the owner.\n"})
        write(folder, {"new.md": "# New\n\nA page added after the upgrade.\n"})
        report = add_paths(ws, principal, [folder], IngestOptions(knowledge_base="handbook"))
        assert (report.added, report.updated) == (1, 1) and report.knowledge_base_id in before
        current = read_document(ws, principal, runbook)
        assert current.revision_id == ids.make("revision", runbook, 2)
        old_revision = unkeyed_id("revision", runbook, 1)
        assert read_document(ws, principal, runbook, revision_id=old_revision).revision_number == 1
        hits = search(ws, principal, SearchRequest(query="page the owner", mode="lexical"))
        assert hits.results[0].document_id == runbook
        fresh = memories.remember(ws, principal, LATER_FACT)
        assert fresh.memory_id == ids.make("memory", again.memory_store_id, sha256(LATER_FACT), 0)
        kb = create_knowledge_base(ws, principal, "later", tenant="local")
        assert kb.knowledge_base_id == ids.make(
            "knowledge_base", unkeyed_id("tenant", "local"), "later"
        )

        # Nothing duplicated, nothing orphaned.
        counts = conn.execute(
            """SELECT (SELECT count(*) FROM document),
                      (SELECT count(DISTINCT knowledge_base_id || '/' || path) FROM document),
                      (SELECT count(*) FROM chunk
                       WHERE revision_id NOT IN (SELECT id FROM revision)),
                      (SELECT count(*) FROM knowledge_base)"""
        ).fetchone()
        assert counts == (5, 5, 0, 3)  # 3 documents + 2 memories; handbook, memories, later
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
