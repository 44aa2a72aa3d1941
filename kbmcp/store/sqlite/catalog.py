"""The catalog concern (kbmcp/store/catalog.py) on SQLite: tenants, knowledge bases, and the
document, revision, chunk and tag rows ingest writes. The logic is `SqlCatalog`'s; this is its
statements."""

from __future__ import annotations

from kbmcp.store.catalog import SqlCatalog
from kbmcp.store.sqlite.dialect import SQLITE
from kbmcp.store.sqlite.id_key import ID_KEYS


class SqliteCatalog(SqlCatalog):
    dialect = SQLITE
    id_keys = ID_KEYS

    INSERT_TENANT = """
    INSERT INTO tenant (public_id, name, created_at) VALUES (:public_id, :name, :now)
    ON CONFLICT (name) DO NOTHING
    """
    SELECT_TENANT = "SELECT id, public_id FROM tenant WHERE name = :name"
    # A tenant named by name or by public id (ten_...): the CLI accepts either.
    SELECT_TENANT_BY_REF = """
    SELECT id, public_id, name FROM tenant WHERE name = :ref OR public_id = :ref
    """

    INSERT_KB = """
    INSERT INTO knowledge_base (public_id, tenant_id, name, description, kind, tags, created_at,
                                updated_at)
    VALUES (:public_id, :tenant_id, :name, :description, :kind, :tags, :now, :now)
    ON CONFLICT (tenant_id, name) DO NOTHING
    """
    # Either kind: knowledge bases and memory stores of a tenant share names (migration 6).
    SELECT_KB_BY_NAME = """
    SELECT id, public_id, kind FROM knowledge_base WHERE tenant_id = :tenant_id AND name = :name
    """
    SELECT_KB_BY_PUBLIC_ID = """
    SELECT id, public_id, name, kind FROM knowledge_base
    WHERE tenant_id = :tenant_id AND public_id = :public_id
    """
    # Knowledge bases (not memory stores) named by public id (kb_...) or by name, with their owner,
    # across tenants.
    SELECT_KBS_BY_REF = """
    SELECT kb.id, kb.public_id, kb.name, t.id, t.public_id, t.name
    FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id
    WHERE (kb.public_id = :ref OR kb.name = :ref) AND kb.kind = 'documents'
    ORDER BY t.name, kb.public_id
    """

    # Everything ingest needs to decide skip / update / restore for each path, in one query per run.
    SELECT_DOCUMENT_STATES = """
    SELECT d.id, d.public_id, d.path, d.title, d.status, d.source, d.attributes_hash,
           r.id, r.content_hash
    FROM document AS d
    LEFT JOIN revision AS r ON r.id = d.current_revision_id
    WHERE d.knowledge_base_id = :kb_id
    """

    INSERT_DOCUMENT = """
    INSERT INTO document (public_id, knowledge_base_id, path, title, kind, source, metadata,
                          status, created_at, updated_at)
    VALUES (:public_id, :kb_id, :path, :title, :kind, :source, :metadata, 'published', :now, :now)
    """
    SELECT_DOCUMENT_FOR_UPDATE = """
    SELECT d.id, d.public_id, d.status, d.current_revision_id, r.content_hash, d.attributes_hash,
           d.source
    FROM document AS d
    LEFT JOIN revision AS r ON r.id = d.current_revision_id
    WHERE d.knowledge_base_id = :kb_id AND d.path = :path
    """
    NEXT_REVISION_NUMBER = """
    SELECT COALESCE(MAX(number), 0) + 1 FROM revision WHERE document_id = :document_id
    """
    UPDATE_DOCUMENT = """
    UPDATE document
    SET title = :title, kind = :kind, source = :source, metadata = :metadata,
        status = 'published', current_revision_id = :revision_id,
        attributes_hash = :attributes_hash, updated_at = :now
    WHERE id = :document_id
    """
    ARCHIVE_DOCUMENT = """
    UPDATE document SET status = 'archived', updated_at = :now WHERE id = :document_id
    """
    DELETE_TAGS = "DELETE FROM document_tag WHERE document_id = :document_id"
    INSERT_TAG = """
    INSERT OR IGNORE INTO document_tag (document_id, key, value, knowledge_base_id)
    SELECT :document_id, :key, :value, d.knowledge_base_id
    FROM document AS d WHERE d.id = :document_id
    """
    INSERT_REVISION = """
    INSERT INTO revision (public_id, document_id, number, content, content_hash, char_count,
                          line_count, created_at)
    VALUES (:public_id, :document_id, :number, :content, :content_hash, :char_count, :line_count,
            :now)
    """
    INSERT_CHUNK = """
    INSERT INTO chunk (public_id, revision_id, ordinal, heading_path, char_start, char_end,
                       line_start, line_end, text)
    VALUES (:public_id, :revision_id, :ordinal, :heading_path, :char_start, :char_end,
            :line_start, :line_end, :text)
    """
    SELECT_STORED_CHUNKS = """
    SELECT id, ordinal, heading_path, char_start, char_end, line_start, line_end, text
    FROM chunk WHERE revision_id = :revision_id ORDER BY ordinal
    """
    DOCUMENT_ID_TAKEN = "SELECT 1 FROM document WHERE public_id = :public_id"
    SELECT_CHUNKS_WITH_VECTORS = """
    SELECT c.heading_path, c.text, v.embedding
    FROM chunk AS c JOIN chunk_vector AS v ON v.chunk_id = c.id
    WHERE c.revision_id = :revision_id
    """


CATALOG = SqliteCatalog()
# bench/ scripts build knowledge bases with these.
ensure_tenant = CATALOG.ensure_tenant
ensure_knowledge_base = CATALOG.ensure_knowledge_base
find_knowledge_base = CATALOG.find_knowledge_base
