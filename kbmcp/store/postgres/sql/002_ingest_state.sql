-- Migration 2 (PostgreSQL): SQLite's migrations 9 and 10, the state ingest keeps between runs.
--
-- source_file: the file each document was last read from (size, mtime, inode, hashes), so an
-- unchanged file is never opened again (kbmcp/store/sql/009_source_file.sql says how it is used).
-- staged_revision: a revision written in parts over several transactions, in no index until
-- its last part makes it current (kbmcp/store/sql/010_staged_revision.sql).
CREATE TABLE source_file (
    document_id bigint PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
    size        bigint NOT NULL,
    mtime_ns    bigint NOT NULL,
    inode       bigint NOT NULL,
    bytes_hash  text NOT NULL,
    read_key    text NOT NULL,
    folder      text,
    checked_ns  bigint NOT NULL
);

CREATE TABLE staged_revision (
    revision_id bigint PRIMARY KEY REFERENCES revision(id) ON DELETE CASCADE,
    document_id bigint NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    chunking    text NOT NULL,
    updated_at  text NOT NULL
);
CREATE INDEX staged_revision_by_document ON staged_revision (document_id);
