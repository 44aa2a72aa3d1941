-- Migration 1: tenants, knowledge bases, documents, immutable revisions, chunks, the model record.
-- Every table joins on INTEGER rowids; `public_id` is the opaque id callers see (see kbmcp/ids.py).
-- Timestamps are ISO 8601 UTC text ('...Z'), so they sort as strings.

CREATE TABLE tenant (
    id          INTEGER PRIMARY KEY,
    public_id   TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);

CREATE TABLE knowledge_base (
    id          INTEGER PRIMARY KEY,
    public_id   TEXT NOT NULL UNIQUE,
    tenant_id   INTEGER NOT NULL REFERENCES tenant(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    tags        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(tags)),  -- {"key": "value"}
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE document (
    id                  INTEGER PRIMARY KEY,
    public_id           TEXT NOT NULL UNIQUE,
    knowledge_base_id   INTEGER NOT NULL REFERENCES knowledge_base(id) ON DELETE CASCADE,
    path                TEXT NOT NULL,           -- relative to the folder that was added, '/'-separated
    title               TEXT NOT NULL,
    kind                TEXT NOT NULL,           -- markdown | rst | text | code: how it was chunked
    source              TEXT,                    -- absolute path of the file it came from
    metadata            TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    status              TEXT NOT NULL DEFAULT 'published' CHECK (status IN ('published', 'archived')),
    current_revision_id INTEGER REFERENCES revision(id),
    attributes_hash     TEXT NOT NULL DEFAULT '',  -- hash of title/kind/tags/metadata: re-add detects changes
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    UNIQUE (knowledge_base_id, path)
);
CREATE INDEX document_by_source ON document(source);
CREATE INDEX document_by_updated ON document(updated_at);

-- Tags are key/value pairs; a key may carry several values (front matter `tags: [a, b]` is stored
-- as tag=a and tag=b). A tag filter matches a document that has every requested pair.
CREATE TABLE document_tag (
    document_id INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (document_id, key, value)
) WITHOUT ROWID;
CREATE INDEX document_tag_by_pair ON document_tag(key, value, document_id);

-- Revisions are immutable snapshots: rows are only ever inserted.
CREATE TABLE revision (
    id           INTEGER PRIMARY KEY,
    public_id    TEXT NOT NULL UNIQUE,
    document_id  INTEGER NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    number       INTEGER NOT NULL,               -- 1, 2, ... per document
    content      TEXT NOT NULL,
    content_hash TEXT NOT NULL,                  -- sha256 of the UTF-8 content
    char_count   INTEGER NOT NULL,
    line_count   INTEGER NOT NULL,
    created_at   TEXT NOT NULL,
    UNIQUE (document_id, number)
);

-- Chunks of every revision are kept (so old citations stay resolvable); only the chunks of the
-- current revision of a published document are in the search indexes.
-- Invariant: revision.content[char_start:char_end] == text (Python string indices).
CREATE TABLE chunk (
    id           INTEGER PRIMARY KEY,            -- also the rowid in chunk_fts and the vector tables
    public_id    TEXT NOT NULL UNIQUE,
    revision_id  INTEGER NOT NULL REFERENCES revision(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading_path TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(heading_path)),  -- JSON array
    char_start   INTEGER NOT NULL,
    char_end     INTEGER NOT NULL,
    line_start   INTEGER NOT NULL,
    line_end     INTEGER NOT NULL,
    text         TEXT NOT NULL,
    UNIQUE (revision_id, ordinal)
);

-- The embedding model the vectors in this file come from (at most one row).
CREATE TABLE embedding_model (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    name        TEXT NOT NULL,
    dimension   INTEGER NOT NULL,
    version     TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
