"""Every trigger function kbmcp installs on PostgreSQL plans its statements at each call
(migration 11): a plan PL/pgSQL kept from a session's first writes, made while the tables were
empty, made ingest into a new database quadratic (kbmcp/store/postgres/sql/011_trigger_plans.sql).
A trigger function added later without the setting fails here."""

from __future__ import annotations

from kbmcp.store.postgres.connection import connect

# The functions behind the triggers on kbmcp's tables, with their settings.
TRIGGER_FUNCTIONS = """
SELECT DISTINCT p.proname, p.proconfig
FROM pg_trigger AS t
JOIN pg_proc AS p ON p.oid = t.tgfoid
JOIN pg_namespace AS n ON n.oid = p.pronamespace
WHERE NOT t.tgisinternal AND n.nspname = 'public'
ORDER BY p.proname
"""
SETTING = "plan_cache_mode=force_custom_plan"


def test_every_trigger_function_is_planned_at_each_call(new_postgres_url: str) -> None:
    conn = connect(new_postgres_url)
    try:
        functions = dict(conn.execute(TRIGGER_FUNCTIONS).fetchall())
    finally:
        conn.close()
    assert {
        "revision_chunk_range_update",
        "keyword_token_add",
        "document_chunk_range_follow",
    } <= set(functions)
    unplanned = sorted(name for name, config in functions.items() if SETTING not in (config or []))
    assert unplanned == []
