"""Scan mode's statement on SQLite (the contract: kbmcp/store/scan.py)."""

from __future__ import annotations

import json

import apsw

from kbmcp.search.scope import Scope
from kbmcp.store.scan import RecentRow
from kbmcp.store.sqlite.search.scope import documents_sql, scope_params

# The scope's documents come from the search engine's scope SQL
# (kbmcp/store/sqlite/search/scope.py), so scan and search validate and apply every filter the
# same way. {time}: the timestamp the scan
# is ordered and windowed by (SORTS), a column name, never caller text.
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
SORTS = {"updated_desc": "d.updated_at", "created_desc": "d.created_at"}


def recent(
    conn: apsw.Connection,
    scope: Scope,
    *,
    sort: str,
    since: str | None,
    until: str | None,
    limit: int,
    excerpt_chars: int,
) -> list[RecentRow]:
    rows = conn.execute(
        SELECT_RECENT.format(documents=documents_sql(scope), time=SORTS[sort]),
        {
            **scope_params(scope),
            "excerpt_chars": excerpt_chars,
            "since": since,
            "until": until,
            "limit": limit,
        },
    )
    return [
        RecentRow(*row[:10], [(key, value) for key, value in json.loads(row[10] or "[]")], row[11])
        for row in rows
    ]
