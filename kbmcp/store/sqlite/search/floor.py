"""The chunks a similarity floor spares (kbmcp/search/floor.py), in SQLite SQL."""

from __future__ import annotations

import json

import apsw
import numpy as np

# The indexed chunks of the selected documents (document row ids as JSON), ascending.
SELECTED_DOCUMENT_CHUNKS = """
SELECT chunk_id
FROM indexed_chunk
WHERE document_id IN (SELECT value FROM json_each(:document_ids))
ORDER BY chunk_id
"""


def selected_document_chunks(conn: apsw.Connection, document_ids: list[int]) -> np.ndarray:
    rows = conn.execute(SELECTED_DOCUMENT_CHUNKS, {"document_ids": json.dumps(document_ids)})
    return np.fromiter((row[0] for row in rows), dtype=np.int64)
