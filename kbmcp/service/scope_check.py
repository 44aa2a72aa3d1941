"""Existence and readability checks for explicitly named knowledge bases and documents.

Used by the verbs that take ids but do not go through the search engine (scan, document
listing). Each check is one batched query, whatever the number of ids. An id that names nothing
the principal can read is a `resource_unavailable` error naming every such id, never a silent
empty result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kbmcp.access import Principal, readable_kb_ids
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.workspace import Workspace, holding_lock

SELECT_READABLE_KB_PUBLIC_IDS = """
SELECT public_id FROM knowledge_base
WHERE id IN (SELECT value FROM json_each(:readable_kb_ids))
  AND public_id IN (SELECT value FROM json_each(:wanted))
"""

SELECT_READABLE_DOCUMENTS = """
SELECT d.public_id, kb.public_id
FROM document AS d
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE d.public_id IN (SELECT value FROM json_each(:wanted))
  AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids))
  AND d.status = 'published'
"""


@holding_lock
def check_knowledge_bases(
    workspace: Workspace, principal: Principal, ids: Sequence[str], *, argument: str
) -> None:
    """Raise ResourceUnavailable unless every id names a knowledge base the principal reads."""
    found = {
        row[0]
        for row in workspace.conn.execute(
            SELECT_READABLE_KB_PUBLIC_IDS,
            {
                "readable_kb_ids": json.dumps(readable_kb_ids(workspace.conn, principal)),
                "wanted": json.dumps(list(ids)),
            },
        )
    }
    missing = [kb_id for kb_id in ids if kb_id not in found]
    if missing:
        raise ResourceUnavailable(
            f"{argument}: no readable knowledge base with id {', '.join(missing)}",
            details={"argument": argument, "ids": missing},
        )


@holding_lock
def check_documents(
    workspace: Workspace,
    principal: Principal,
    ids: Sequence[str],
    *,
    argument: str,
    knowledge_base_ids: Sequence[str] | None = None,
) -> None:
    """Raise ResourceUnavailable unless every id names a published, readable document; raise
    InvalidRequest when one lies outside the selected knowledge bases (a conflicting scope)."""
    rows = workspace.conn.execute(
        SELECT_READABLE_DOCUMENTS,
        {
            "readable_kb_ids": json.dumps(readable_kb_ids(workspace.conn, principal)),
            "wanted": json.dumps(list(ids)),
        },
    ).fetchall()
    kb_of = dict(rows)
    missing = [doc_id for doc_id in ids if doc_id not in kb_of]
    if missing:
        raise ResourceUnavailable(
            f"{argument}: no readable published document with id {', '.join(missing)}",
            details={"argument": argument, "ids": missing},
        )
    if knowledge_base_ids:
        outside = [doc_id for doc_id in ids if kb_of[doc_id] not in set(knowledge_base_ids)]
        if outside:
            raise InvalidRequest(
                f"{argument}: {', '.join(outside)} not in the selected knowledge_base_ids",
                details={
                    "argument": argument,
                    "ids": outside,
                    "conflicts_with": "knowledge_base_ids",
                },
            )
