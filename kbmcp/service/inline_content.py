"""include_content: the text of the first documents a query found, in its results.

A step after ranking (the ranked results are final; this adds text to some of them), inside the
search's read transaction, so the text is that of the cited revisions in the same snapshot. The
text is what a targeted read from offset 0 returns (kbmcp/service/read.py reads it): a window
of `limit_chars` characters with `next_offset` to read on, or a memory's whole text. Only the
first result of each of the first MAX_INLINED_DOCUMENTS distinct documents (or memories) carries
it, which bounds the response (5 x 10,000 characters, or a memory's at most 20,000).
"""

from __future__ import annotations

import dataclasses

from kbmcp.access import Principal
from kbmcp.search.models import MAX_INLINED_DOCUMENTS, SearchResponse
from kbmcp.service import read
from kbmcp.workspace import Workspace


def with_content(
    workspace: Workspace, principal: Principal, response: SearchResponse, limit_chars: int
) -> SearchResponse:
    inlined: set[str] = set()
    results = []
    for result in response.results:
        if result.document_id in inlined or len(inlined) == MAX_INLINED_DOCUMENTS:
            results.append(result)
            continue
        inlined.add(result.document_id)
        content = read.inline_content(
            workspace,
            principal,
            result.document_id,
            result.revision_id,
            limit_chars,
            whole=result.kind == "memory",
        )
        results.append(dataclasses.replace(result, content=content))
    return dataclasses.replace(response, results=results)
