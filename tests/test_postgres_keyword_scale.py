"""The keyword index's scale tables on PostgreSQL (sql/003_keyword_scale.sql): each store's count
of chunks per token (`keyword_token`, bm25's n without counting postings) follows every write,
and the migration fills it and the postings' impact order for a database indexed before it."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from kbmcp.store.postgres import keyword, migrations
from kbmcp.store.postgres.connection import connect
from tests.postgres_fixtures import insert_chunk, insert_revision, insert_tenant_and_two_stores

VOCABULARY = [f"w{n}" for n in range(40)]
COUNTED = """
SELECT token, knowledge_base_id, count(*)::bigint FROM chunk_term
GROUP BY token, knowledge_base_id ORDER BY 1, 2
"""
KEPT = "SELECT token, knowledge_base_id, rows FROM keyword_token ORDER BY 1, 2"


def _catalog(conn: psycopg.Connection[Any], chunks: int, *, store_keys: bool = True) -> None:
    """A tenant, two stores, one document each and `chunks` chunks (odd ids in store 1);
    `store_keys` False: at a schema before migration 9 (revisions and chunks name no store)."""
    insert_tenant_and_two_stores(conn)
    for store_id in (1, 2):
        conn.execute(
            "INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind, metadata,"
            " created_at, updated_at) VALUES (%(id)s, %(public)s, %(id)s, 'a.md', 'A', 'text',"
            " '{}', 'x', 'x')",
            {"id": store_id, "public": f"doc_{store_id}"},
        )
        insert_revision(conn, store_id, store_id, store_id, store_keys=store_keys)
    for chunk in range(1, chunks + 1):
        store = 2 - chunk % 2
        insert_chunk(conn, chunk, store, store, store_keys=store_keys)


def _row(rng: random.Random, chunk: int) -> keyword.KeywordRow:
    body = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 12)))
    return keyword.KeywordRow(2 - chunk % 2, chunk, "w1 title", ["w2"], body)


def test_token_counts_follow_every_write(fresh_postgres_url: str) -> None:
    """Batches added and removed in several transactions (a chunk's postings go with its
    keyword row): the kept counts are always the postings counted, and a token no store holds
    any more has no row."""
    rng = random.Random(7)
    conn = connect(fresh_postgres_url)
    try:
        with conn.transaction():
            _catalog(conn, 60)
        indexed: set[int] = set()
        for step in range(8):
            with conn.transaction():
                added = rng.sample(sorted(set(range(1, 61)) - indexed), 10)
                keyword.index_chunks(conn, [_row(rng, chunk) for chunk in added])
                indexed.update(added)
                if step % 2:
                    removed = rng.sample(sorted(indexed), 7)
                    keyword.unindex_chunks(conn, removed)
                    indexed.difference_update(removed)
            assert conn.execute(KEPT).fetchall() == conn.execute(COUNTED).fetchall()
        with conn.transaction():
            keyword.unindex_chunks(conn, sorted(indexed))
        assert conn.execute(KEPT).fetchall() == []
    finally:
        conn.close()


def test_statistics_read_the_kept_counts(fresh_postgres_url: str) -> None:
    """keyword_stats' n of a token is its chunks in the readable stores (from keyword_token),
    a phrase's from its postings."""
    conn = connect(fresh_postgres_url)
    try:
        with conn.transaction():
            _catalog(conn, 4)
            keyword.index_chunks(conn, [
                keyword.KeywordRow(1, 1, "t", [], "alpha beta"),
                keyword.KeywordRow(2, 2, "t", [], "alpha gamma"),
                keyword.KeywordRow(1, 3, "t", [], "beta alpha"),
                keyword.KeywordRow(2, 4, "t", [], "alpha beta"),
            ])  # fmt: skip
        phrases = [("alpha", ("alpha",)), ("beta", ("beta",)), ("alpha beta", ("alpha", "beta"))]
        both = keyword.keyword_stats(conn, phrases, [1, 2])
        assert both.rows == 4
        assert both.containing == {"alpha": 4, "beta": 3, "alpha beta": 2}
        one = keyword.keyword_stats(conn, phrases, [2])
        assert one.rows == 2
        assert one.containing == {"alpha": 2, "beta": 1, "alpha beta": 1}
    finally:
        conn.close()


def test_the_migration_counts_and_orders_earlier_postings(fresh_postgres_url: str) -> None:
    """A database indexed at schema 2 (postings without impact, no counts): migration 3 fills
    keyword_token from the postings and gives each posting its impact with its store's average
    length, the order a large search reads a token's postings in."""
    conn = psycopg.connect(fresh_postgres_url, autocommit=True)
    try:
        migrations.migrate(conn, target=2)
        rng = random.Random(3)
        with conn.transaction():
            _catalog(conn, 30, store_keys=False)
            for chunk in range(1, 31):
                found = keyword.chunk_keywords("w1 title", ["w2"], _row(rng, chunk).text)
                store = 2 - chunk % 2
                conn.execute(
                    "INSERT INTO chunk_keyword VALUES (%s, %s, %s, %s, %s)",
                    (chunk, store, *found.sizes),
                )
                for posting in found.postings:
                    conn.execute(
                        "INSERT INTO chunk_term (token, knowledge_base_id, chunk_id, length,"
                        " in_title, in_heading, in_body, positions)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (posting.token, store, chunk, found.length, *posting.counts,
                         list(posting.positions)),
                    )  # fmt: skip
        assert migrations.migrate(conn, target=3) == [3]
        assert conn.execute(KEPT).fetchall() == conn.execute(COUNTED).fetchall()
        averages = dict(
            conn.execute(
                "SELECT knowledge_base_id, tokens::float8 / rows FROM keyword_total"
            ).fetchall()
        )
        rows = conn.execute(
            "SELECT knowledge_base_id, length, in_title, in_heading, in_body, impact"
            " FROM chunk_term"
        ).fetchall()
        assert rows
        for store, length, title, heading, body, impact in rows:
            want = keyword.impact(title, heading, body, length, averages[store])
            assert impact == pytest.approx(want, rel=1e-6)
    finally:
        conn.close()
