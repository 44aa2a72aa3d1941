"""Scan mode's statement on SQLite (the contract and the logic: kbmcp/store/scan.py)."""

from __future__ import annotations

from typing import ClassVar

from kbmcp.store.scan import SqlScan
from kbmcp.store.sqlite.dialect import SQLITE
from kbmcp.store.sqlite.search import scope


class SqliteScan(SqlScan):
    dialect = SQLITE
    scope_sql = scope

    # {documents}: the scope's (kbmcp/store/sqlite/search/scope.py); {time}: the timestamp the
    # scan is ordered and windowed by (SORT_COLUMNS).
    SELECT_RECENT = """
    WITH scope_document AS MATERIALIZED ({documents})
    SELECT kb.kind, d.public_id, kb.public_id, r.public_id, r.number, d.path, d.title, d.updated_at,
           d.created_at, r.char_count,
           (SELECT json_group_array(json_array(t.key, t.value))
            FROM (SELECT key, value FROM document_tag
                  WHERE document_id = d.id ORDER BY key, value) AS t),
           (SELECT substr(c.text, 1, :excerpt_chars + 1) FROM chunk AS c
            WHERE c.revision_id = d.current_revision_id ORDER BY c.ordinal LIMIT 1)
    FROM scope_document AS s
    JOIN document AS d ON d.id = s.id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    JOIN revision AS r ON r.id = d.current_revision_id
    WHERE (:since IS NULL OR {time} >= :since)
      AND (:until IS NULL OR {time} < :until)
    ORDER BY {time} DESC, d.public_id
    LIMIT :limit
    """
    # sort -> the timestamp it orders by, newest first; since/until window the same timestamp.
    SORT_COLUMNS: ClassVar[dict[str, str]] = {
        "updated_desc": "d.updated_at",
        "created_desc": "d.created_at",
    }


SCAN = SqliteScan()
