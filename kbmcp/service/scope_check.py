"""Existence and readability checks for explicitly named knowledge bases and documents.

Used by document listing, which takes knowledge-base ids but no other filter (search and scan
resolve their scope with kbmcp/search/scope.py). The check is one batched query, whatever the
number of ids. An id that names nothing the principal can read is a `resource_unavailable` error
naming every such id, never a silent empty result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kbmcp.access import Principal, readable_kb_ids
from kbmcp.errors import ResourceUnavailable
from kbmcp.workspace import Workspace, holding_lock

SELECT_READABLE_KB_PUBLIC_IDS = """
SELECT public_id FROM knowledge_base
WHERE id IN (SELECT value FROM json_each(:readable_kb_ids))
  AND public_id IN (SELECT value FROM json_each(:wanted))
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
