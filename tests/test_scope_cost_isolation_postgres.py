"""tests/test_scope_cost_isolation.py on PostgreSQL: Alice's filtered scope reaches the filters'
tables only through indexes that lead with her stores.

PostgreSQL has no step counter, and its plans change with the tables' sizes (Bob's data changes
them), so the work cannot be compared row for row between two databases. What makes it follow
Alice's own data is how each filter table is read: by an index condition on the store (migration
5: `document_tag` and `document_metadata` by (knowledge_base_id, key, value), `document` by
(knowledge_base_id, path)), or by the ids such a read returned. A sequential scan, or an index
read without the store, reads Bob's rows too. Sequential scans are turned off, as the planner
would not take them on tables of real size; what it then chooses must be one of the former.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from kbmcp.store.postgres.scope import documents_sql, scope_params
from tests.postgres_fixtures import create_database, drop_database
from tests.test_scope_cost_isolation import FILTERS, Tenants, alice_scope, build

FILTER_TABLES = {"document", "document_tag", "document_metadata", "chunk_vec"}
# An index read bounded by the caller's stores, or a lookup of ids another such read returned.
BOUNDED = ("knowledge_base_id", "(id = ", "(document_id = ")


@pytest.fixture(scope="module")
def databases(
    postgres_server_url: str, postgres_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Tenants, Tenants]]:
    root = tmp_path_factory.mktemp("isolation-postgres")
    urls = [create_database(postgres_server_url, f"isolation-{name}", template=postgres_template)
            for name in ("alone", "crowded")]  # fmt: skip
    try:
        yield (
            build(root, "alone", urls[0], crowded=False),
            build(root, "crowded", urls[1], crowded=True),
        )
    finally:
        for url in urls:
            drop_database(postgres_server_url, url)


def unbounded_reads(
    db: Path | str,
    sql: str,
    params: dict[str, Any],
    configure: Callable[[psycopg.Connection[Any]], None] | None = None,
) -> list[str]:
    """The plan's reads of the filter tables that are not bounded by the store (see BOUNDED),
    as 'node type on table: condition'."""
    with psycopg.connect(str(db), autocommit=True) as conn:
        if configure is not None:
            configure(conn)
        conn.execute("ANALYZE")
        conn.execute("SET enable_seqscan = off")
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
    if isinstance(plan, str):  # kbmcp's connections read json as text
        plan = json.loads(plan)
    return list(_unbounded(plan[0]["Plan"]))


def _unbounded(node: dict[str, Any]) -> Iterator[str]:
    table = node.get("Relation Name") or _index_table(node)
    if table in FILTER_TABLES:
        # (a bitmap heap scan reads the pages its index scan found: the same condition)
        condition = node.get("Index Cond") or node.get("Recheck Cond") or ""
        if not any(bound in condition for bound in BOUNDED):
            yield f"{node['Node Type']} on {table}: {condition or 'no index condition'}"
    for child in node.get("Plans", []):
        yield from _unbounded(child)


def _index_table(node: dict[str, Any]) -> str | None:
    """A bitmap index scan names its index, not its table."""
    index = node.get("Index Name", "")
    return next((t for t in sorted(FILTER_TABLES, key=len, reverse=True)
                 if index.startswith(t)), None)  # fmt: skip


@pytest.mark.parametrize("name", list(FILTERS))
def test_a_filtered_scope_reads_its_tables_within_the_callers_stores(
    databases: tuple[Tenants, Tenants], name: str
) -> None:
    for tenants in databases:
        scope = alice_scope(tenants, name)
        sql, params = documents_sql(scope), scope_params(scope)
        assert unbounded_reads(tenants.db, sql, params) == [], tenants.db
        with psycopg.connect(str(tenants.db), autocommit=True) as conn:
            assert conn.execute(sql, params).fetchall()  # the scope selects Alice's documents


def test_an_unbounded_read_is_seen(databases: tuple[Tenants, Tenants]) -> None:
    """The check above can fail: a tag lookup that does not name the store (as the filter read
    before migration 5) is reported."""
    _, crowded = databases
    old_filter = "SELECT document_id FROM document_tag WHERE key = %(key)s AND value = %(value)s"
    found = unbounded_reads(crowded.db, old_filter, {"key": "t", "value": "x"})
    assert found and all(" on document_tag: " in read for read in found)


def test_an_unfiltered_search_reads_the_callers_vectors_only(
    databases: tuple[Tenants, Tenants],
) -> None:
    """Alice's search without a filter (her stores, too few chunks for the HNSW index) reads
    her stores' vectors by store, not every vector of the table (migration 6)."""
    from kbmcp.store.postgres.connection import configure
    from kbmcp.store.postgres.vector_channel import EXACT_UNSCOPED_POOL, FLOOR_SLACK, POOL_FLOOR
    from kbmcp.store.postgres.vectors import Float32Vector

    sql = EXACT_UNSCOPED_POOL.format(floor=POOL_FLOOR)
    for tenants in databases:
        with psycopg.connect(str(tenants.db), autocommit=True) as conn:
            configure(conn)
            (dimension,) = conn.execute("SELECT dimension FROM embedding_model").fetchone()
            params = {
                "searched_stores": [tenants.alice_kb, tenants.alice_store],
                "query_vector": Float32Vector(b"\0\0\x80\x3f" * dimension),  # 1.0 everywhere
                "min_similarity": None,
                "floor_exempt": "{}",
                "floor_slack": FLOOR_SLACK,
                "pool_size": 133,
            }
            assert len(conn.execute(sql, params).fetchall()) == 30  # her 20 notes, 10 memories
        assert unbounded_reads(tenants.db, sql, params, configure) == [], tenants.db
