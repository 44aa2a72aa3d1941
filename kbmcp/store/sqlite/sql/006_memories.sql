-- Migration 6: memory stores and memories.
--
-- A memory store is a knowledge_base row of kind 'memories' (public id mst_...), owned by one
-- tenant, with a name and tags like any knowledge base; a memory is a document in it (public id
-- mem_..., its path is its id). So memories get revisions, chunks, the FTS5 and vector indexes,
-- the index_log that keeps in-memory copies current, and the owner-tenant trigger without a
-- second copy of any of them, and the ranking statement ranks both kinds in one list.
-- Trap: everything that means "knowledge bases" must say kind = 'documents' (kbmcp/access.py's
-- readable sets, listings, `kbmcp add`, shares); memory stores are reached only through the
-- memory code (kbmcp/service/memories.py) and the memory part of a search scope.
-- A tenant's knowledge bases and memory stores share names: UNIQUE (tenant_id, name) predates
-- this migration, and SQLite cannot change a table constraint without rebuilding the table.
ALTER TABLE knowledge_base ADD COLUMN kind TEXT NOT NULL DEFAULT 'documents'
    CHECK (kind IN ('documents', 'memories'));

-- `remember` looks for an identical memory (same content) in the store before writing one.
CREATE INDEX revision_by_content_hash ON revision(content_hash);
