"""Scan mode's statement on PostgreSQL (the contract and the logic: kbmcp/store/scan.py):
SQLite's, with timestamps and public ids ordered and compared as bytes (`COLLATE "C"`,
SQLite's BINARY), so the newest-first order, its ties and the window are SQLite's whatever the
database's locale."""

from __future__ import annotations

from typing import ClassVar

from kbmcp.store.postgres import scope
from kbmcp.store.postgres.dialect import POSTGRES
from kbmcp.store.scan import SqlScan


class PostgresScan(SqlScan):
    dialect = POSTGRES
    scope_sql = scope

    # {documents}: the scope's (kbmcp/store/postgres/scope.py); {time}: the timestamp the scan
    # is ordered and windowed by (SORT_COLUMNS). Trap: a parameter only compared with NULL has
    # no type PostgreSQL can infer: `::text`.
    SELECT_RECENT = """
    WITH scope_document AS MATERIALIZED ({documents})
    SELECT kb.kind, d.public_id, kb.public_id, r.public_id, r.number, d.path, d.title, d.updated_at,
           d.created_at, r.char_count,
           ARRAY(SELECT ARRAY[t.key, t.value] FROM document_tag AS t
                 WHERE t.knowledge_base_id = d.knowledge_base_id AND t.document_id = d.id
                 ORDER BY t.key COLLATE "C", t.value COLLATE "C"),
           (SELECT substr(c.text, 1, %(excerpt_chars)s + 1) FROM chunk AS c
            WHERE c.knowledge_base_id = d.knowledge_base_id
              AND c.revision_id = d.current_revision_id
            ORDER BY c.ordinal LIMIT 1)
    FROM scope_document AS s
    JOIN document AS d ON d.knowledge_base_id = s.knowledge_base_id AND d.id = s.id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    JOIN revision AS r
      ON r.knowledge_base_id = d.knowledge_base_id AND r.id = d.current_revision_id
    WHERE (%(since)s::text IS NULL OR {time} COLLATE "C" >= %(since)s)
      AND (%(until)s::text IS NULL OR {time} COLLATE "C" < %(until)s)
    ORDER BY {time} COLLATE "C" DESC, d.public_id COLLATE "C"
    LIMIT %(limit)s
    """
    SORT_COLUMNS: ClassVar[dict[str, str]] = {
        "updated_desc": "d.updated_at",
        "created_desc": "d.created_at",
    }


SCAN = PostgresScan()
