"""The evaluation concern (kbmcp/store/evaluation.py) on SQLite."""

from __future__ import annotations

import apsw

# The published documents of a knowledge base and the files they were added from.
SELECT_DOCUMENT_SOURCES = """
SELECT d.public_id, d.source
FROM document AS d
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.public_id = :knowledge_base_id AND d.status = 'published' AND d.source IS NOT NULL
"""


def document_sources(conn: apsw.Connection, knowledge_base_id: str) -> list[tuple[str, str]]:
    rows = conn.execute(SELECT_DOCUMENT_SOURCES, {"knowledge_base_id": knowledge_base_id})
    return [(document_id, source) for document_id, source in rows]
