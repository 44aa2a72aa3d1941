"""Migration 9 (kbmcp/store/postgres/sql/009_store_keys.sql): every table of a store's data names
the store, and every key and foreign key between those tables includes it (the shape Citus
distributes by store, docs/scale-out.md), on a new database and on one upgraded with rows in
it, whose ids do not change."""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.store.postgres import citus, keyword, migrations
from kbmcp.store.postgres.connection import connect
from tests.postgres_fixtures import insert_tenant_and_two_stores

STORE = "knowledge_base_id"
# Tables whose rows belong to one store, and how each finds its document (a column path).
OWNED_THROUGH = {
    "revision": "document_id",
    "chunk": "revision_id -> revision.document_id",
    "chunk_vector": "chunk_id -> chunk.revision_id -> revision.document_id",
    "source_file": "document_id",
    "staged_revision": "document_id",
}
KEYS = """
SELECT conrelid::regclass::text, conname, contype,
       ARRAY(SELECT a.attname::text FROM unnest(conkey) WITH ORDINALITY AS k(n, i)
             JOIN pg_attribute AS a ON a.attrelid = conrelid AND a.attnum = k.n ORDER BY k.i),
       confrelid::regclass::text,
       ARRAY(SELECT a.attname::text FROM unnest(confkey) WITH ORDINALITY AS k(n, i)
             JOIN pg_attribute AS a ON a.attrelid = confrelid AND a.attnum = k.n ORDER BY k.i)
FROM pg_constraint
WHERE contype IN ('p', 'u', 'f') AND conrelid = ANY(%(tables)s::regclass[])
ORDER BY 1, 2
"""
IDS = {
    "document": "SELECT id, knowledge_base_id FROM document ORDER BY id",
    "revision": "SELECT id, document_id FROM revision ORDER BY id",
    "chunk": "SELECT id, revision_id FROM chunk ORDER BY id",
    "chunk_vector": "SELECT chunk_id FROM chunk_vector ORDER BY chunk_id",
    "chunk_vec": "SELECT chunk_id, knowledge_base_id FROM chunk_vec ORDER BY chunk_id",
    "chunk_term": "SELECT count(*), sum(chunk_id) FROM chunk_term",
    "keyword_total": "SELECT * FROM keyword_total ORDER BY 1",
    "keyword_token": "SELECT * FROM keyword_token ORDER BY 1, 2",
    "document_tag": "SELECT * FROM document_tag ORDER BY 1, 2, 3",
    "document_metadata": "SELECT document_id, key, type FROM document_metadata ORDER BY 1, 2",
    "source_file": "SELECT document_id, size FROM source_file ORDER BY 1",
    "staged_revision": "SELECT revision_id, document_id FROM staged_revision ORDER BY 1",
    "indexed_chunk": "SELECT * FROM indexed_chunk ORDER BY 1",
}


def _rows_at_schema_7(conn: psycopg.Connection[Any]) -> None:
    """Documents in two stores as a database at schema 7 holds them: revisions, chunks and
    their vectors without a store column; tags, metadata, a recorded file, a staged revision,
    and the keyword rows (their tables are unchanged)."""
    insert_tenant_and_two_stores(conn)
    conn.execute("ALTER TABLE chunk_vec ALTER COLUMN embedding TYPE vector(3)")
    chunk = 0
    keywords = []
    for document, store in ((1, 1), (2, 1), (3, 2)):
        conn.execute(
            "INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind, metadata,"
            " current_revision_id, created_at, updated_at) VALUES (%(d)s, %(p)s, %(s)s, %(path)s,"
            " 'T', 'text', %(meta)s, %(r)s, 'x', 'x')",
            {"d": document, "p": f"doc_{document}", "s": store, "path": f"d{document}.md",
             "meta": '{"owner": "ops"}', "r": 10 * document + 1},
        )  # fmt: skip
        conn.execute(
            "INSERT INTO document_tag (document_id, key, value, knowledge_base_id)"
            " VALUES (%s, 'team', 'a', %s)",
            (document, store),
        )
        for number in (1, 2):  # revision 2 is staged (written in parts), not current
            revision = 10 * document + number
            conn.execute(
                "INSERT INTO revision (id, public_id, document_id, number, content, content_hash,"
                " char_count, line_count, created_at) VALUES (%s, %s, %s, %s, 'alpha beta',"
                " 'h', 10, 1, 'x')",
                (revision, f"rev_{revision}", document, number),
            )
            for ordinal in range(3):
                chunk += 1
                conn.execute(
                    "INSERT INTO chunk (id, public_id, revision_id, ordinal, char_start,"
                    " char_end, line_start, line_end, text) VALUES (%s, %s, %s, %s, 0, 10, 1,"
                    " 1, 'alpha beta')",
                    (chunk, f"chk_{chunk}", revision, ordinal),
                )
                conn.execute("INSERT INTO chunk_vector VALUES (%s, %s)", (chunk, f"[{chunk},1,0]"))
                if number == 1:
                    conn.execute(
                        "INSERT INTO chunk_vec VALUES (%s, %s, %s)",
                        (chunk, store, f"[{chunk},1,0]"),
                    )
                    keywords.append(keyword.KeywordRow(store, chunk, "T", [], "alpha beta"))
        conn.execute("INSERT INTO source_file VALUES (%s, 5, 1, 1, 'b', 'k', NULL, 1)", (document,))
        conn.execute(
            "INSERT INTO staged_revision VALUES (%s, %s, 'c', 'x')", (10 * document + 2, document)
        )
    keyword.index_chunks(conn, keywords)


def _snapshot(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    return {name: conn.execute(sql).fetchall() for name, sql in IDS.items()}


def test_an_existing_database_gets_the_store_keys_with_its_ids_unchanged(
    fresh_postgres_url: str,
) -> None:
    conn = psycopg.connect(fresh_postgres_url, autocommit=True)
    try:
        migrations.migrate(conn, target=8)
        with conn.transaction():
            _rows_at_schema_7(conn)
        before = _snapshot(conn)
        assert migrations.migrate(conn, target=9) == [9]
        assert _snapshot(conn) == before  # every id, count and derived row as it was
        for table in OWNED_THROUGH:
            wrong = conn.execute(
                f"SELECT count(*) FROM {table} AS t JOIN document AS d ON d.id = "
                + {
                    "revision": "t.document_id",
                    "chunk": "(SELECT r.document_id FROM revision AS r WHERE r.id = t.revision_id)",
                    "chunk_vector": "(SELECT r.document_id FROM chunk AS c JOIN revision AS r"
                    " ON r.id = c.revision_id WHERE c.id = t.chunk_id)",
                    "source_file": "t.document_id",
                    "staged_revision": "t.document_id",
                }[table]
                + " WHERE t.knowledge_base_id IS DISTINCT FROM d.knowledge_base_id"
            ).fetchone()[0]
            total = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert (wrong, total > 0) == (0, True), table
        # the keys hold: a chunk cannot name a revision of another store
        with psycopg.connect(fresh_postgres_url) as other:
            try:
                other.execute(
                    "INSERT INTO chunk (public_id, revision_id, ordinal, char_start, char_end,"
                    " line_start, line_end, text, knowledge_base_id)"
                    " VALUES ('chk_x', 11, 9, 0, 1, 1, 1, 'x', 2)"
                )
                other.commit()
                raise AssertionError("a chunk of store 2 in a revision of store 1 was accepted")
            except psycopg.errors.ForeignKeyViolation:
                other.rollback()
        # the triggers still keep the keyword counts when rows go
        conn.execute("DELETE FROM chunk_keyword WHERE chunk_id = 1")
        assert conn.execute(
            "SELECT rows FROM keyword_total WHERE knowledge_base_id = 1"
        ).fetchone() == (5,)
    finally:
        conn.close()


def test_every_key_between_store_tables_includes_the_store(new_postgres_url: str) -> None:
    """The rule Citus checks when it distributes: every primary key and unique constraint of a
    distributed table, and every foreign key between two of them, includes the store, at the
    same place on both sides of a foreign key."""
    conn = connect(new_postgres_url)
    try:
        assert migrations.current_version(conn) == migrations.latest_version()
        rows = conn.execute(KEYS, {"tables": list(citus.DISTRIBUTED_TABLES)}).fetchall()
    finally:
        conn.close()
    checked = 0
    for table, name, kind, columns, referenced, referenced_columns in rows:
        if kind == "f" and referenced not in citus.DISTRIBUTED_TABLES:
            assert referenced == "knowledge_base" and columns == [STORE], name  # a reference table
            continue
        assert STORE in columns, (table, name)
        if kind == "f":
            assert referenced_columns.index(STORE) == columns.index(STORE), name
        checked += 1
    assert checked >= 30
