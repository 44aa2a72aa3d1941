"""A filtered scope's chunks as runs of consecutive ids on PostgreSQL (kbmcp/store/postgres/
scope.py, SCOPE_RUNS): the same ids as the scope's chunk listing, whether each revision's chunks
are consecutive ids (one run per revision, merged with its neighbours) or interleaved with
another revision's."""

from __future__ import annotations

from typing import Any

import psycopg

from kbmcp.search.resolved import Scope
from kbmcp.store.postgres import scope
from kbmcp.store.postgres.connection import connect
from tests.postgres_fixtures import insert_chunk, insert_revision, insert_tenant_and_two_stores


def _documents(conn: psycopg.Connection[Any], *, store_keys: bool = True) -> None:
    """A tenant, two stores, documents 1-2 (store 1, interleaved chunks: odd ids are document 1's,
    even ids up to 20 document 2's) and documents 3-4 (store 2, consecutive chunks 21-25 and
    26-30), each with one revision. `store_keys` False: at a schema before migration 9
    (revisions and chunks name no store)."""
    insert_tenant_and_two_stores(conn)
    for document, store in ((1, 1), (2, 1), (3, 2), (4, 2)):
        conn.execute(
            "INSERT INTO document (id, public_id, knowledge_base_id, path, title, kind, metadata,"
            " current_revision_id, created_at, updated_at) VALUES (%(id)s, %(public)s, %(store)s,"
            " %(path)s, 'A', 'text', '{}', %(id)s, 'x', 'x')",
            {"id": document, "public": f"doc_{document}", "store": store,
             "path": f"d{document}/a.md"},
        )  # fmt: skip
        insert_revision(conn, document, document, store, store_keys=store_keys)
    for chunk in range(1, 31):
        revision = (2 - chunk % 2) if chunk <= 20 else (3 if chunk <= 25 else 4)
        store = 1 if revision <= 2 else 2
        insert_chunk(conn, chunk, revision, store, store_keys=store_keys)


def _listed(conn: psycopg.Connection[Any], found: Scope) -> list[int]:
    rows = scope.CHUNKS_OF_DOCUMENTS.format(documents=scope.documents_sql(found))
    return sorted(row[0] for row in conn.execute(rows, scope.scope_params(found)))


def test_runs_hold_the_scopes_chunks(fresh_postgres_url: str) -> None:
    conn = connect(fresh_postgres_url)
    try:
        with conn.transaction():
            _documents(conn)
        cases = {
            ("d1/",): [(1, 1), (3, 3), (5, 5), (7, 7), (9, 9), (11, 11), (13, 13), (15, 15),
                       (17, 17), (19, 19)],
            ("d1/", "d2/"): [(1, 20)],
            ("d3/", "d4/"): [(21, 30)],
            # chunk 20 (store 1) and 21 (store 2) are adjacent ids, not one run: a run is in
            # one store (a range of its rows, on Citus of its shard)
            ("d2/", "d3/"): [(2, 2), (4, 4), (6, 6), (8, 8), (10, 10), (12, 12), (14, 14),
                             (16, 16), (18, 18), (20, 20), (21, 25)],
            ("d9/",): [],
        }  # fmt: skip
        for paths, want in cases.items():
            found = Scope([1, 2], None, {"document_paths": list(paths)})
            runs = scope.scope_runs(conn, found)
            assert runs is not None
            assert list(zip(runs.lo.tolist(), runs.hi.tolist(), strict=True)) == want, paths
            assert runs.store.tolist() == [1 if hi <= 20 else 2 for _, hi in want], paths
            assert runs.ids().tolist() == _listed(conn, found), paths
            assert runs.rows == len(_listed(conn, found))
        assert scope.scope_runs(conn, Scope([1, 2], None, {}, everything=True)) is None
    finally:
        conn.close()
