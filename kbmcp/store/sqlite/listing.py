"""Listing knowledge bases and documents on SQLite (the contract and the logic:
kbmcp/store/listing.py)."""

from __future__ import annotations

from kbmcp.store.listing import SqlListing
from kbmcp.store.sqlite.dialect import SQLITE
from kbmcp.store.sqlite.search import scope


class SqliteListing(SqlListing):
    dialect = SQLITE
    scope_sql = scope

    SELECT_KNOWLEDGE_BASES = """
    SELECT kb.public_id, kb.name, kb.description, kb.tags, kb.created_at, kb.updated_at,
           (SELECT count(*) FROM document AS d
            WHERE d.knowledge_base_id = kb.id AND d.status = 'published') AS documents,
           (SELECT count(*) FROM indexed_chunk AS i WHERE i.knowledge_base_id = kb.id) AS chunks
    FROM knowledge_base AS kb
    WHERE kb.id IN (SELECT value FROM json_each(:readable_kb_ids))
    ORDER BY kb.name, kb.public_id
    """

    # The documents come from the search engine's scope SQL (kbmcp/store/sqlite/search/scope.py),
    # so listing, search and scan validate and apply knowledge bases, path prefixes and tags the
    # same way.
    # Keyset pagination on (updated_at DESC, public_id): stable while documents are added.
    SELECT_DOCUMENTS = """
    WITH scope_document AS MATERIALIZED ({documents})
    SELECT d.public_id, kb.public_id, d.path, d.title, d.status, r.public_id, r.number,
           r.char_count, d.updated_at, d.metadata,
           (SELECT json_group_array(json_array(t.key, t.value))
            FROM (SELECT key, value FROM document_tag
                  WHERE document_id = d.id ORDER BY key, value) AS t)
    FROM scope_document AS s
    JOIN document AS d ON d.id = s.id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    LEFT JOIN revision AS r ON r.id = d.current_revision_id
    WHERE :cursor_updated IS NULL
       OR d.updated_at < :cursor_updated
       OR (d.updated_at = :cursor_updated AND d.public_id > :cursor_id)
    ORDER BY d.updated_at DESC, d.public_id
    LIMIT :limit
    """


LISTING = SqliteListing()
