"""The evaluation concern (kbmcp/store/evaluation.py) on PostgreSQL: SQLite's statement."""

from __future__ import annotations

from typing import Any

import psycopg

# The published documents of a knowledge base and the files they were added from.
SELECT_DOCUMENT_SOURCES = """
SELECT d.public_id, d.source
FROM document AS d
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.public_id = %(knowledge_base_id)s AND d.status = 'published' AND d.source IS NOT NULL
"""


def document_sources(
    conn: psycopg.Connection[Any], knowledge_base_id: str
) -> list[tuple[str, str]]:
    rows = conn.execute(SELECT_DOCUMENT_SOURCES, {"knowledge_base_id": knowledge_base_id})
    return [(document_id, source) for document_id, source in rows]
