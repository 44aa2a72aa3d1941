-- Migration 8: a document's tenant is its knowledge base's owner, by construction.
--
-- Migration 5 copied the owner into document.tenant_id (a trigger filled it on insert) and one
-- read path, the validation of `document_ids`, compared the copy with the knowledge base's
-- owner. A copy can disagree with its source (an UPDATE of either, a writer that sets it), and
-- every other read path (search, reads by id, listings, scans) went by the knowledge base alone.
-- So the copy is dropped rather than guarded: a document's tenant is knowledge_base.tenant_id of
-- its knowledge base, one value that no path can read differently. (SQLite drops a column whose
-- only dependants are its own REFERENCES clause and the trigger that fills it.)
DROP TRIGGER document_owner_tenant;
ALTER TABLE document DROP COLUMN tenant_id;
