"""Targeted reads on PostgreSQL (the contract and the logic: kbmcp/store/reads.py): the SQLite
statements with id lists as arrays (`= ANY`, `unnest ... WITH ORDINALITY`)."""

from __future__ import annotations

from kbmcp.store.postgres.dialect import POSTGRES
from kbmcp.store.reads import SqlReads


class PostgresReads(SqlReads):
    dialect = POSTGRES
    # Trap: a parameter only compared with NULL has no type PostgreSQL can infer: `::text`.
    SELECT_DOCUMENT_REVISION = """
    SELECT d.id, d.public_id, kb.public_id, kb.name, owner.public_id, owner.name, d.path, d.title,
           d.kind, d.status, d.source, r.public_id, r.number, r.content, r.char_count, r.created_at,
           r.id = d.current_revision_id, r.content_hash
    FROM document AS d
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    JOIN tenant AS owner ON owner.id = kb.tenant_id
    JOIN revision AS r ON r.knowledge_base_id = d.knowledge_base_id AND r.document_id = d.id
    WHERE d.public_id = %(document_id)s
      AND d.knowledge_base_id = ANY(%(readable_kb_ids)s::bigint[])
      AND (CASE WHEN %(revision_id)s::text IS NULL THEN r.id = d.current_revision_id
                ELSE r.public_id = %(revision_id)s END)
      -- A forgotten memory is not served again (as in SELECT_CHUNKS).
      AND (kb.kind = 'documents' OR d.status = 'published')
    """

    # A document's revisions, newest first (the UNIQUE (document_id, number) index orders them).
    SELECT_REVISIONS = """
    SELECT r.public_id, r.number, r.created_at, r.content_hash, r.id = d.current_revision_id
    FROM revision AS r
    JOIN document AS d ON d.knowledge_base_id = r.knowledge_base_id AND d.id = r.document_id
    WHERE r.document_id = %(document_row_id)s
    ORDER BY r.number DESC
    LIMIT %(limit)s
    """

    # The requested knowledge bases the principal can read (a NULL id: unknown or not readable), in
    # the order requested.
    RESOLVE_KNOWLEDGE_BASE_IDS = """
    SELECT want.value, kb.id
    FROM unnest(%(knowledge_base_ids)s::text[]) WITH ORDINALITY AS want(value, n)
    LEFT JOIN knowledge_base AS kb
           ON kb.public_id = want.value
          AND kb.id = ANY(%(readable_kb_ids)s::bigint[])
    ORDER BY want.n
    """

    # Trap: PostgreSQL does not evaluate AND from left to right, so the cheap length test is a CASE
    # around the two trims: a fragment never loads (detoasts) the revision's text.
    SELECT_CHUNKS = """
    SELECT c.public_id, d.public_id, kb.public_id, r.public_id, d.path, d.title, c.heading_path,
           c.char_start, c.char_end, c.line_start, c.line_end, c.text,
           r.id = d.current_revision_id AS is_current, d.kind, r.content_hash, kb.kind,
           r.char_count, kb.name,
           CASE WHEN r.char_count - (c.char_end - c.char_start) > %(blank_slack)s THEN false
                ELSE btrim(substr(r.content, 1, c.char_start), %(blanks)s) = ''
                     AND btrim(substr(r.content, c.char_end + 1), %(blanks)s) = ''
           END AS covers_whole
    FROM chunk AS c
    JOIN revision AS r ON r.knowledge_base_id = c.knowledge_base_id AND r.id = c.revision_id
    JOIN document AS d ON d.knowledge_base_id = r.knowledge_base_id AND d.id = r.document_id
    JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
    WHERE c.public_id = ANY(%(chunk_ids)s::text[])
      AND c.knowledge_base_id = ANY(%(readable_ids)s::bigint[])
      -- A forgotten memory is not served again (its rows stay for audit); an archived document's
      -- chunks stay readable by id, so old citations resolve.
      AND (kb.kind = 'documents' OR d.status = 'published')
    """


READS = PostgresReads()
