"""The PostgreSQL store's foundations: URLs, connecting, migrations (kbmcp/store/postgres/)."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from kbmcp.errors import StoreError
from kbmcp.store.postgres import migrations
from kbmcp.store.postgres.connection import connect
from kbmcp.store.postgres.url import is_postgres_url, shown_url
from tests import processes
from tests.backend_state import OLDER_TAGGED_ROWS


def test_urls_are_told_from_paths() -> None:
    assert is_postgres_url("postgresql://u@h/db")
    assert is_postgres_url("POSTGRES://u@h/db")
    assert is_postgres_url("  postgresql:///db?host=/tmp")
    assert not is_postgres_url("kb.db")
    assert not is_postgres_url("postgresql:/not-a-url.db")
    assert not is_postgres_url(Path("postgresql://x"))


def test_passwords_never_shown() -> None:
    assert shown_url("postgresql://me:s3cret@db:5432/kb") == "postgresql://me:***@db:5432/kb"
    assert shown_url("postgresql://me@db/kb") == "postgresql://me@db/kb"


def test_importing_kbmcp_loads_no_driver() -> None:
    import sys

    code = (
        "import sys, kbmcp.cli, kbmcp.store.copy, kbmcp.store.postgres.url;"
        "print('psycopg' in sys.modules)"
    )
    out = processes.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_a_fresh_database_is_migrated_whole(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url)
    try:
        assert migrations.current_version(conn) == migrations.latest_version()
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
        for table in ("tenant", "knowledge_base", "document", "revision", "chunk", "share",
                      "token", "id_key", "chunk_vector", "chunk_vec", "chunk_term",
                      "keyword_total", "indexed_chunk", "document_metadata"):  # fmt: skip
            assert table in tables
        origin = conn.execute("SELECT origin FROM id_key").fetchone()[0]
        assert origin == "pinned"  # the test suite's KBMCP_TEST_ID_KEY
        # again: nothing to do, nothing changed
        assert migrations.migrate(conn) == []
    finally:
        conn.close()


def test_servers_starting_together_migrate_once(fresh_postgres_url: str) -> None:
    applied: list[list[int]] = []
    errors: list[BaseException] = []
    conns = [connect(fresh_postgres_url, migrate=False) for _ in range(4)]
    start = threading.Barrier(len(conns))

    def run(conn: psycopg.Connection) -> None:
        try:
            start.wait()
            applied.append(migrations.migrate(conn))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in conns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for conn in conns:
        conn.close()
    assert errors == []
    assert sorted(applied, key=len) == [[], [], [], list(range(1, migrations.latest_version() + 1))]


STORE_SCOPED = 5  # the migration that copies each document's store into its tag/metadata rows


def test_tag_and_metadata_rows_learn_their_store_on_upgrade(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url, migrate=False)
    try:
        migrations.migrate(conn, target=STORE_SCOPED - 1)
        with conn.transaction():
            conn.execute(OLDER_TAGGED_ROWS)
        before = {
            table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall())
            for table in ("document_tag", "document_metadata")
        }
        assert migrations.migrate(conn) == list(
            range(STORE_SCOPED, migrations.latest_version() + 1)
        )
        for table, columns in (("document_tag", "document_id, key, value"),
                               ("document_metadata", "document_id, key, type, value")):  # fmt: skip
            rows = conn.execute(f"SELECT {columns} FROM {table}").fetchall()
            assert sorted(rows) == before[table]
            stores = conn.execute(
                f"SELECT DISTINCT t.document_id, t.knowledge_base_id, d.knowledge_base_id"
                f" FROM {table} AS t JOIN document AS d ON d.id = t.document_id"
            ).fetchall()
            assert sorted(stores) == [(1, 10, 10), (2, 20, 20)]
        with conn.transaction():  # written after the upgrade: the trigger fills the store in
            conn.execute('UPDATE document SET metadata = \'{"team": "dev"}\' WHERE id = 2')
        assert conn.execute(
            "SELECT knowledge_base_id, value #>> '{}' FROM document_metadata WHERE document_id = 2"
        ).fetchall() == [(20, "dev")]
    finally:
        conn.close()


def test_a_newer_schema_is_refused(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url)
    try:
        conn.execute("UPDATE kbmcp_schema SET version = 999")
        with pytest.raises(StoreError, match="newer than this kbmcp"):
            migrations.migrate(conn)
    finally:
        conn.close()


def test_the_keyword_totals_follow_the_indexed_rows(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url)
    try:
        with conn.transaction():
            conn.execute("INSERT INTO tenant VALUES (1, 'ten_1', 't', 'x')")
            conn.execute(
                "INSERT INTO knowledge_base (id, public_id, tenant_id, name, created_at,"
                " updated_at) VALUES (1, 'kb_1', 1, 'k', 'x', 'x')"
            )
            conn.execute(
                "INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind,"
                " metadata, created_at, updated_at)"
                " VALUES (1, 'doc_1', 1, 'a.md', 'A', 'markdown', '{\"n\": 2, \"ok\": true}',"
                " 'x', 'x')"
            )
            conn.execute(
                "INSERT INTO revision (id, public_id, document_id, number, content, content_hash,"
                " char_count, line_count, created_at, knowledge_base_id)"
                " VALUES (1, 'rev_1', 1, 1, 'one two', 'h', 7, 1, 'x', 1)"
            )
            for i in (1, 2):
                conn.execute(
                    "INSERT INTO chunk (id, public_id, revision_id, ordinal, char_start, char_end,"
                    " line_start, line_end, text, knowledge_base_id)"
                    " VALUES (%s, %s, 1, %s, 0, 7, 1, 1, 'one two', 1)",
                    (i, f"chk_{i}", i),
                )
            from kbmcp.store.postgres import keyword

            keyword.index_chunks(
                conn,
                [keyword.KeywordRow(1, i, "Title words", ["Part"], "one two two") for i in (1, 2)],
            )
        # title 2 + heading 1 + body 3 tokens, twice
        assert conn.execute("SELECT rows, tokens FROM keyword_total").fetchone() == (2, 12)
        assert conn.execute(
            "SELECT in_title, in_heading, in_body, positions FROM chunk_term"
            " WHERE token = 'two' AND chunk_id = 1"
        ).fetchone() == (0, 0, 2, [(2 << 20) | 1, (2 << 20) | 2])
        keyword.unindex_chunks(conn, [1])
        assert conn.execute("SELECT rows, tokens FROM keyword_total").fetchone() == (1, 6)
        assert conn.execute("SELECT count(*) FROM chunk_term WHERE chunk_id = 1").fetchone()[0] == 0
        # the metadata rows carry SQLite json_each's type names
        assert sorted(conn.execute("SELECT key, type FROM document_metadata").fetchall()) == [
            ("n", "integer"),
            ("ok", "true"),
        ]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://nobody@127.0.0.1:1/kb", "cannot connect to PostgreSQL at"),
        ("postgresql://u:pw@[nonsense/kb", "PostgreSQL"),
        ("postgresql://u@/kb?host=/nonexistent-socket-dir", "cannot connect to PostgreSQL at"),
    ],
)
def test_a_bad_url_or_an_unreachable_server_is_one_error(url: str, says: str) -> None:
    with pytest.raises(StoreError) as caught:
        connect(url)
    message = caught.value.message
    assert says in message
    assert "\n" not in message
    assert "pw" not in message


def test_a_missing_database_is_one_error(postgres_server_url: str) -> None:
    from tests.postgres_fixtures import database_url

    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL at .*does not exist"):
        connect(database_url(postgres_server_url, "kbmcp_no_such_database"))


def test_cli_reports_an_unreachable_server_on_one_line(kbmcp, tmp_path: Path) -> None:
    result = kbmcp("copy", "postgresql://nobody:pw@127.0.0.1:1/kb", tmp_path / "out.db")
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith("error: cannot connect to PostgreSQL at postgresql://nobody:***@")
    assert not (tmp_path / "out.db").exists()


def test_a_url_is_never_taken_for_a_file_name(kbmcp, tmp_path: Path, monkeypatch) -> None:
    """--db / KBMCP_DB give a URL to PostgreSQL, never to Path() (which would make a folder
    named `postgresql:`): an unreachable server is one line naming the URL."""
    monkeypatch.chdir(tmp_path)
    result = kbmcp("--db", "postgresql://u@127.0.0.1:1/kb", "ls")
    assert result.code == 1 and result.err.count("\n") == 1
    assert result.err.startswith(
        "error: cannot connect to PostgreSQL at postgresql://u@127.0.0.1:1/kb"
    )
    monkeypatch.setenv("KBMCP_DB", "postgresql://u@127.0.0.1:1/kb")
    result = kbmcp("add", tmp_path)
    assert result.code == 1 and "cannot connect to PostgreSQL at" in result.err
    assert list(tmp_path.iterdir()) == []
