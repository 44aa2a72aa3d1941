-- Migration 13: the audit trail (docs/operations.md, "Audit trail").
--
-- One append-only table: who did what, when, and how it ended. Every write (add, remember,
-- forget, share, unshare, token create and revoke, tenant and knowledge-base creation, copy,
-- import) and every refused request (an unusable bearer token, a missing scope, an id the
-- caller cannot read) is a row; searches are counted per token, several folded into one row
-- (`count`), their query text only where the operator asked for it (KBMCP_AUDIT_QUERIES).
-- A row never holds a secret: tokens appear by their public id (tok_...), never their secret.
--
-- Keyed by the acting tenant's row id, with no foreign key: the trail outlives what it
-- describes, and a refused token may name no tenant at all (tenant_id 0). Rows are only ever
-- inserted, and deleted by the retention setting (KBMCP_AUDIT_RETENTION_DAYS) once old.
CREATE TABLE audit_event (
    id        INTEGER PRIMARY KEY,
    tenant_id INTEGER NOT NULL,           -- the acting tenant; 0: none known (a refused token)
    at        TEXT NOT NULL,              -- ISO 8601 UTC, the machine's clock (never KBMCP_NOW)
    token_id  TEXT,                       -- tok_... of the caller; NULL: the local operator
    via       TEXT NOT NULL,              -- cli | stdio | http
    action    TEXT NOT NULL,              -- a tool (remember) or a command (kb share)
    outcome   TEXT NOT NULL,              -- ok, or the error code (forbidden, unauthorized, ...)
    objects   TEXT NOT NULL DEFAULT '[]', -- JSON array of the public ids involved
    detail    TEXT NOT NULL DEFAULT '{}', -- JSON object: counts, a query's text (opt-in), ...
    count     INTEGER NOT NULL DEFAULT 1  -- identical events folded into this row
);
-- `kbmcp audit --since` and the retention's delete read a range of times.
CREATE INDEX audit_event_by_time ON audit_event(at);
