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


# The indexed chunks of the documents at exactly these paths (JSON) in these knowledge bases
# (row ids as JSON), ascending: a path in document_paths that names a document is as explicit
# as its id (kbmcp/search/floor.py).
CHUNKS_AT_PATHS = """
SELECT i.chunk_id
FROM indexed_chunk AS i
JOIN document AS d ON d.id = i.document_id
WHERE i.knowledge_base_id IN (SELECT value FROM json_each(:knowledge_base_ids))
  AND d.path IN (SELECT value FROM json_each(:paths))
ORDER BY i.chunk_id
"""


def chunks_at_paths(
    conn: apsw.Connection, knowledge_base_ids: list[int], paths: list[str]
) -> np.ndarray:
    parameters = {"knowledge_base_ids": json.dumps(knowledge_base_ids), "paths": json.dumps(paths)}
    rows = conn.execute(CHUNKS_AT_PATHS, parameters)
    return np.fromiter((row[0] for row in rows), dtype=np.int64)
