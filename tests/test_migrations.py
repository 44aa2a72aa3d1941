"""The store: versioned migrations, the connection's settings, and clear errors for bad files."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from kbmcp.embed.base import ModelFingerprint
from kbmcp.errors import StoreError
from kbmcp.store.sqlite import migrations
from kbmcp.store.sqlite.connection import BUSY_TIMEOUT_MS, open_connection, write_transaction
from kbmcp.store.sqlite.migrations import Migration, all_migrations, current_version, latest_version
from kbmcp.store.sqlite.vectors import VEC_TABLE, record_model
from tests.backend_state import OLDER_TAGGED_ROWS

pytestmark = pytest.mark.sqlite_only("file: the SQLite schema migrations")

FINGERPRINT = ModelFingerprint("hashing", 384, "1")


def schema(conn: apsw.Connection) -> list[tuple[str, str, str, str]]:
    """Every schema object (tables, indexes, FTS5 and vec0 shadow tables, triggers), normalised:
    no root pages, whitespace collapsed, sorted."""
    rows = conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master")
    return sorted((kind, name, table, " ".join(sql.split())) for kind, name, table, sql in rows)


def record(conn: apsw.Connection, fingerprint: ModelFingerprint = FINGERPRINT) -> None:
    with write_transaction(conn):
        record_model(conn, fingerprint)


def test_fresh_file_reaches_the_latest_version(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "fresh.db")
    assert latest_version() == len(all_migrations()) >= 2
    assert current_version(conn) == latest_version()
    names = {row[1] for row in schema(conn)}
    assert {"tenant", "knowledge_base", "document", "document_tag", "revision", "chunk"} <= names
    assert {"embedding_model", "chunk_fts", "chunk_vector"} <= names
    assert migrations.migrate(conn) == []  # nothing left to apply
    conn.close()


def test_step_by_step_upgrade_ends_in_the_fresh_schema(tmp_path: Path) -> None:
    fresh = open_connection(tmp_path / "fresh.db")
    record(fresh)
    expected = schema(fresh)
    assert any(name == VEC_TABLE for _, name, _, _ in expected)

    path = tmp_path / "upgraded.db"
    for version in range(1, latest_version() + 1):
        conn = open_connection(path, apply_migrations=False)
        assert current_version(conn) == version - 1
        assert migrations.migrate(conn, target=version) == [version]
        conn.close()
    conn = open_connection(path)  # reopening applies nothing more
    assert current_version(conn) == latest_version()
    record(conn)
    assert schema(conn) == expected
    conn.close()
    fresh.close()


def test_upgrade_keeps_rows_written_by_an_older_version(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = open_connection(path, apply_migrations=False)
    migrations.migrate(conn, target=1)
    conn.execute(
        "INSERT INTO tenant (public_id, name, created_at) VALUES ('ten_1', 'local', '2026')"
    )
    conn.close()
    conn = open_connection(path)
    assert current_version(conn) == latest_version()
    assert conn.execute("SELECT name FROM tenant").fetchall() == [("local",)]
    conn.close()


STORE_SCOPED = 11  # the migration that copies each document's store into its tag and metadata rows


def test_tag_and_metadata_rows_learn_their_store_on_upgrade(tmp_path: Path) -> None:
    """Rows written before migration 11 get their document's knowledge base, keep their values
    and types, and a filter finds them within the readable store only."""
    from kbmcp.search.resolved import Scope
    from kbmcp.store.sqlite.search.scope import filter_documents

    conn = open_connection(tmp_path / "old.db", apply_migrations=False)
    migrations.migrate(conn, target=STORE_SCOPED - 1)
    conn.execute(OLDER_TAGGED_ROWS)
    before = {
        table: sorted(conn.execute(f"SELECT * FROM {table}"))
        for table in ("document_tag", "document_metadata")
    }
    assert migrations.migrate(conn) == list(range(STORE_SCOPED, latest_version() + 1))
    for table, columns in (("document_tag", "document_id, key, value"),
                           ("document_metadata", "document_id, key, type, value")):  # fmt: skip
        assert sorted(conn.execute(f"SELECT {columns} FROM {table}")) == before[table]
        stores = conn.execute(
            f"SELECT t.document_id, t.knowledge_base_id, d.knowledge_base_id FROM {table} AS t"
            " JOIN document AS d ON d.id = t.document_id"
        ).fetchall()
        assert {(doc, store) for doc, store, _ in stores} == {(1, 10), (2, 20)}
        assert all(store == owner for _, store, owner in stores)
    for filters in ({"tags": [["t", "x"]]}, {"metadata": {"team": "ops"}}):
        (kind,) = filter_documents(conn, Scope(readable_kb_ids=[20], filters=filters))
        assert kind.stores == [20] and kind.documents is not None
        assert kind.documents.tolist() == [2]
    # Written after the upgrade: the triggers fill the store in.
    conn.execute(
        """INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind, metadata,
                                 created_at, updated_at)
           VALUES (3, 'doc_3', 20, 'y.md', 'Y', 'markdown', '{"team": "dev"}', '2026', '2026')"""
    )
    conn.execute('UPDATE document SET metadata = \'{"team": "dev"}\' WHERE id = 1')
    assert sorted(conn.execute("SELECT document_id, knowledge_base_id, value FROM document_metadata"
                               " WHERE key = 'team'")) == [(1, 10, "dev"), (2, 20, "ops"),
                                                           (3, 20, "dev")]  # fmt: skip
    conn.close()


TEXT_LAST = 12  # the migration that rebuilds `revision` with its text as the last column
REVISION_ROWS = """
INSERT INTO tenant (id, public_id, name, created_at) VALUES (1, 'ten_a', 'alice', '2026');
INSERT INTO knowledge_base (id, public_id, tenant_id, name, created_at, updated_at)
VALUES (10, 'kb_a', 1, 'a', '2026', '2026');
INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind, created_at, updated_at)
VALUES (1, 'doc_1', 10, 'big.md', 'Big', 'markdown', '2026', '2026'),
       (2, 'doc_2', 10, 'small.md', 'Small', 'markdown', '2026', '2026');
INSERT INTO revision (id, public_id, document_id, number, content, content_hash, char_count,
                      line_count, created_at)
VALUES (5, 'rev_5', 1, 1, :big, 'hash-5', length(:big), 1, '2026'),
       (6, 'rev_6', 1, 2, :big || 'more', 'hash-6', length(:big) + 4, 1, '2027'),
       (7, 'rev_7', 2, 1, 'small text', 'hash-7', 10, 1, '2026');
UPDATE document SET current_revision_id = 6 WHERE id = 1;
UPDATE document SET current_revision_id = 7 WHERE id = 2;
INSERT INTO chunk (id, public_id, revision_id, ordinal, char_start, char_end, line_start,
                   line_end, text)
VALUES (50, 'chk_50', 5, 0, 0, 5, 1, 1, 'xxxxx'), (60, 'chk_60', 6, 0, 0, 5, 1, 1, 'xxxxx'),
       (70, 'chk_70', 7, 0, 0, 5, 1, 1, 'small');
INSERT INTO staged_revision (revision_id, document_id, chunking, updated_at)
VALUES (6, 1, 'c', '2027');
"""
REVISION_COLUMNS = (
    "id, public_id, document_id, number, content, content_hash, char_count, line_count, created_at"
)


def test_an_upgraded_file_keeps_every_revision_with_its_text_last(tmp_path: Path) -> None:
    """Migration 12 rebuilds `revision` (a large document's content_hash and char_count were
    behind its whole text, on overflow pages): every row and every reference survives, the text
    is the last column, and the references still cascade afterwards."""
    conn = open_connection(tmp_path / "old.db", apply_migrations=False)
    migrations.migrate(conn, target=TEXT_LAST - 1)
    conn.execute(REVISION_ROWS, {"big": "x" * 200_000})  # ~50 overflow pages
    tables = {"revision": REVISION_COLUMNS, "chunk": "*", "staged_revision": "*",
              "document": "id, current_revision_id"}  # fmt: skip
    before = {t: sorted(conn.execute(f"SELECT {c} FROM {t}")) for t, c in tables.items()}
    assert migrations.migrate(conn) == list(range(TEXT_LAST, latest_version() + 1))
    assert {t: sorted(conn.execute(f"SELECT {c} FROM {t}")) for t, c in tables.items()} == before
    columns = [row[1] for row in conn.execute("PRAGMA table_info(revision)")]
    assert columns[-1] == "content" and len(columns) == 9
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # back on after migrating
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.execute("DELETE FROM document WHERE id = 1")
    assert conn.execute("SELECT id FROM revision").fetchall() == [(7,)]
    assert conn.execute("SELECT id FROM chunk").fetchall() == [(70,)]
    assert conn.execute("SELECT count(*) FROM staged_revision").fetchone()[0] == 0
    conn.close()


def test_a_migration_that_would_break_references_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migrations run with foreign keys off (a rebuilt table is dropped and renamed), so they
    are checked before COMMIT: a step that leaves a dangling reference rolls everything back."""
    path = tmp_path / "old.db"
    conn = open_connection(path, apply_migrations=False)
    migrations.migrate(conn, target=1)
    conn.close()
    first = all_migrations()[0]
    dangling = Migration(
        2,
        "dangling",
        "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
        "CREATE TABLE child (parent_id INTEGER REFERENCES parent(id));"
        "INSERT INTO child VALUES (7);",
    )
    monkeypatch.setattr(migrations, "all_migrations", lambda: [first, dangling])
    with pytest.raises(StoreError, match="references do not resolve"):
        open_connection(path)
    monkeypatch.undo()
    conn = open_connection(path, apply_migrations=False)
    assert current_version(conn) == 1
    assert not {"parent", "child"} & {row[1] for row in schema(conn)}
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    conn.close()


def test_a_failing_migration_is_rolled_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade applies every pending migration or none: the file keeps its old version."""
    path = tmp_path / "old.db"
    conn = open_connection(path, apply_migrations=False)
    migrations.migrate(conn, target=1)
    conn.close()
    first = all_migrations()[0]
    fine = Migration(2, "fine", "CREATE TABLE fine_step (x);")
    broken = Migration(3, "broken", "CREATE TABLE half_done (x); SELECT no_such_function();")
    monkeypatch.setattr(migrations, "all_migrations", lambda: [first, fine, broken])
    with pytest.raises(apsw.SQLError):
        open_connection(path)
    monkeypatch.undo()
    conn = open_connection(path, apply_migrations=False)
    assert current_version(conn) == 1
    tables = {row[1] for row in schema(conn)}
    assert not {"fine_step", "half_done"} & tables and "tenant" in tables
    conn.close()


def test_a_new_file_whose_migrations_fail_is_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Created and migrated in one transaction: complete or absent (no empty or half-migrated
    file that every later command would trip on)."""
    first = all_migrations()[0]
    broken = Migration(2, "broken", "CREATE TABLE half_done (x); SELECT no_such_function();")
    monkeypatch.setattr(migrations, "all_migrations", lambda: [first, broken])
    folder = tmp_path / "new"
    with pytest.raises(apsw.SQLError):
        open_connection(folder / "kb.db")
    assert list(folder.iterdir()) == []


def test_a_newer_schema_is_a_clear_store_error(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    conn = open_connection(path)
    conn.execute(f"PRAGMA user_version = {latest_version() + 1}")
    conn.close()
    with pytest.raises(StoreError, match=r"newer than this kbmcp understands.*upgrade kbmcp"):
        open_connection(path)


def test_not_a_database_is_a_clear_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is not an SQLite file\n" * 100)
    with pytest.raises(StoreError, match="not a kbmcp database"):
        open_connection(path)


def test_a_damaged_database_is_a_clear_store_error(tmp_path: Path) -> None:
    good = tmp_path / "good.db"
    conn = open_connection(good)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(good.read_bytes()[:100])  # the header survives, the pages do not
    with pytest.raises(StoreError, match="is damaged"):
        open_connection(damaged)


def test_a_folder_that_cannot_be_created_is_a_clear_store_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreError, match="cannot create the folder"):
        open_connection(tmp_path / "a-file" / "kb.db")


def test_connection_settings(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "kb.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    with pytest.raises(apsw.ConstraintError):  # foreign keys are enforced
        conn.execute(
            "INSERT INTO knowledge_base (public_id, tenant_id, name, created_at, updated_at) "
            "VALUES ('kb_x', 999, 'x', 'now', 'now')"
        )
    conn.close()


def test_write_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "kb.db")
    with pytest.raises(RuntimeError), write_transaction(conn):
        conn.execute("INSERT INTO tenant (public_id, name, created_at) VALUES ('t', 't', 'x')")
        raise RuntimeError("midway")
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM tenant").fetchone()[0] == 0
    conn.close()


def test_recording_another_model_recreates_the_vector_index(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "kb.db")
    record(conn)
    record(conn, ModelFingerprint("other", 8, "2"))
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone()[0]
    assert "float[8]" in sql
    assert conn.execute("SELECT name, dimension FROM embedding_model").fetchall() == [("other", 8)]
    conn.close()


def test_a_postgres_migration_splits_into_its_commands_as_a_coordinator_runs_them() -> None:
    """On a Citus coordinator each command of a migration file runs alone: a semicolon ends a
    command only outside quotes, dollar-quoted bodies and comments; comment-only tails are
    dropped; every real file splits into pieces of its own text, in order."""
    from kbmcp.store.postgres.migrations import all_migrations, statements

    sql = (
        "-- a comment; not an end\nCREATE TABLE t (a text DEFAULT 'x;y');\n"
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN NULL;\n"
        "END $$;\nCOMMENT ON TABLE t IS $c$ one; two $c$;\n-- the end\n"
    )
    assert statements(sql) == [
        "-- a comment; not an end\nCREATE TABLE t (a text DEFAULT 'x;y')",
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN NULL;\nEND $$",
        "COMMENT ON TABLE t IS $c$ one; two $c$",
    ]
    for migration in all_migrations():  # each command a piece of the file, in its order
        at = 0
        for command in statements(migration.sql):
            found = migration.sql.find(command, at)
            assert found >= at, (migration.name, command[:80])
            at = found + len(command)
