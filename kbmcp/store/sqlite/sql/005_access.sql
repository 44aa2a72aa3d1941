-- Migration 5: access control. Shares of knowledge bases to other tenants, and bearer tokens.
-- Tenants and knowledge bases (owned by one tenant) exist since migration 1. Who may read what is
-- decided in one place, kbmcp/access.py (`readable_kb_ids`).

-- A share grants one knowledge base, read-only, to another tenant (the grantee). Unsharing sets
-- revoked_at instead of deleting the row, so `kbmcp kb list` can show when access ended;
-- sharing again clears it. Every reader filters on `revoked_at IS NULL`.
CREATE TABLE share (
    knowledge_base_id INTEGER NOT NULL REFERENCES knowledge_base(id) ON DELETE CASCADE,
    tenant_id         INTEGER NOT NULL REFERENCES tenant(id) ON DELETE CASCADE,  -- the grantee
    shared_at         TEXT NOT NULL,
    revoked_at        TEXT,                      -- NULL while the share is in force
    PRIMARY KEY (knowledge_base_id, tenant_id)
) WITHOUT ROWID;
-- The readable-set query looks shares up by grantee.
CREATE INDEX share_by_grantee ON share(tenant_id, knowledge_base_id) WHERE revoked_at IS NULL;

-- A token authenticates one tenant with some scopes. The secret is shown once at creation and
-- never stored: `secret_hash` is the SHA-256 of the whole secret (a 256-bit random value, so a
-- fast hash is enough; there is nothing to brute-force). The secret embeds `public_id`, which is
-- how a presented secret finds its row before the hashes are compared in constant time.
CREATE TABLE token (
    id                 INTEGER PRIMARY KEY,
    public_id          TEXT NOT NULL UNIQUE,     -- tok_<16 hex>
    tenant_id          INTEGER NOT NULL REFERENCES tenant(id) ON DELETE CASCADE,
    name               TEXT NOT NULL DEFAULT '', -- a label for `kbmcp token list`
    secret_hash        TEXT NOT NULL,            -- sha256 hex of the secret
    scopes             TEXT NOT NULL CHECK (json_valid(scopes) AND json_type(scopes) = 'array'),
    -- Trap: NULL means "every knowledge base the tenant can read"; an empty array means "none".
    -- Public ids (kb_...) of the allow-list, intersected with the tenant's readable set.
    knowledge_base_ids TEXT CHECK (knowledge_base_ids IS NULL
                                   OR (json_valid(knowledge_base_ids)
                                       AND json_type(knowledge_base_ids) = 'array')),
    created_at         TEXT NOT NULL,
    expires_at         TEXT,                     -- NULL: never expires
    revoked_at         TEXT                      -- NULL: not revoked
);
CREATE INDEX token_by_tenant ON token(tenant_id);

-- Every document records its owner tenant: the tenant of its knowledge base's owner when it was
-- written. Search checks that the two still agree when documents are selected by id, so a
-- document can never be reached through another tenant's knowledge base (issue 9, item 4).
-- Ingest does not set the column: the trigger fills it from the knowledge base on insert, so no
-- writer can get it wrong. Documents of a shared knowledge base keep their owner tenant.
-- (ALTER TABLE ... REFERENCES needs a NULL default while foreign keys are on.)
ALTER TABLE document ADD COLUMN tenant_id INTEGER REFERENCES tenant(id);
UPDATE document
SET tenant_id = (SELECT kb.tenant_id FROM knowledge_base AS kb WHERE kb.id = document.knowledge_base_id);
CREATE TRIGGER document_owner_tenant AFTER INSERT ON document
WHEN NEW.tenant_id IS NULL
BEGIN
    UPDATE document
    SET tenant_id = (SELECT kb.tenant_id FROM knowledge_base AS kb WHERE kb.id = NEW.knowledge_base_id)
    WHERE id = NEW.id;
END;
