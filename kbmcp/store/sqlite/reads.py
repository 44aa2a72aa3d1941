"""Targeted reads on SQLite (the contract and the logic: kbmcp/store/reads.py)."""

from __future__ import annotations

from kbmcp.store.reads import SqlReads
from kbmcp.store.sqlite.dialect import SQLITE


class SqliteReads(SqlReads):
    dialect = SQLITE
    # The revision to read with where it comes from: its knowledge base (or memory store), the
    # tenant that owns it, and the source it was added from.
    SELECT_DOCUMENT_REVISION = """
    SELECT d.id, d.public_id, kb.public_id, kb.name, owner.public_id, owner.name, d.path, d.title,
           d.kind, d.status, d.source, r.public_id, r.number, r.content, r.char_count, r.created_at,
           r.id = d.current_revision_id, r.content_hash
    FROM document AS d
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    JOIN tenant AS owner ON owner.id = kb.tenant_id
    JOIN revision AS r ON r.document_id = d.id
    WHERE d.public_id = :document_id
      AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_kb_ids))
      AND (CASE WHEN :revision_id IS NULL THEN r.id = d.current_revision_id
                ELSE r.public_id = :revision_id END)
      -- A forgotten memory is not served again (as in SELECT_CHUNKS).
      AND (kb.kind = 'documents' OR d.status = 'published')
    """

    # A document's revisions, newest first (the UNIQUE (document_id, number) index orders them).
    SELECT_REVISIONS = """
    SELECT r.public_id, r.number, r.created_at, r.content_hash, r.id = d.current_revision_id
    FROM revision AS r
    JOIN document AS d ON d.id = r.document_id
    WHERE r.document_id = :document_row_id
    ORDER BY r.number DESC
    LIMIT :limit
    """

    # The requested knowledge bases the principal can read (a NULL id: unknown or not readable).
    RESOLVE_KNOWLEDGE_BASE_IDS = """
    SELECT want.value, kb.id
    FROM json_each(:knowledge_base_ids) AS want
    LEFT JOIN knowledge_base AS kb
           ON kb.public_id = want.value
          AND kb.id IN (SELECT value FROM json_each(:readable_kb_ids))
    """

    SELECT_CHUNKS = """
    SELECT c.public_id, d.public_id, kb.public_id, r.public_id, d.path, d.title, c.heading_path,
           c.char_start, c.char_end, c.line_start, c.line_end, c.text,
           r.id = d.current_revision_id AS is_current, d.kind, r.content_hash, kb.kind,
           r.char_count, kb.name,
           -- The chunk covers its whole revision when only blanks lie outside it (the chunker drops
           -- them). The length test comes first so that a fragment never loads the revision's text.
           r.char_count - (c.char_end - c.char_start) <= :blank_slack
           AND trim(substr(r.content, 1, c.char_start), :blanks) = ''
           AND trim(substr(r.content, c.char_end + 1), :blanks) = '' AS covers_whole
    FROM chunk AS c
    JOIN revision AS r ON r.id = c.revision_id
    JOIN document AS d ON d.id = r.document_id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    WHERE c.public_id IN (SELECT value FROM json_each(:chunk_ids))
      AND d.knowledge_base_id IN (SELECT value FROM json_each(:readable_ids))
      -- A forgotten memory is not served again (its rows stay for audit); an archived document's
      -- chunks stay readable by id, so old citations resolve.
      AND (kb.kind = 'documents' OR d.status = 'published')
    """


READS = SqliteReads()
