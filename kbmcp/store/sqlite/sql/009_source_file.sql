-- Migration 9: the file each document was last read from, as the file system describes it.
--
-- `kbmcp add` and `kbmcp watch` compare a file's size, mtime_ns and inode with this row before
-- opening it: when they match (and the file was not modified just before it was recorded, see
-- `checked_ns`), the file is unchanged and is never opened, so an unchanged PDF or HTML page is
-- not extracted again. When they differ, the file's bytes are hashed: the same `bytes_hash`
-- means unchanged after all (a `touch`, a checkout, a copy), and only the row is refreshed.
-- `read_key` is the hash of everything besides the bytes that decides the stored document (its
-- kind, the extractor's version, --tag, --meta, the chunking rules): when it changes, the file
-- is read again. A document written from text (`add_documents`, a memory) has no row.
CREATE TABLE source_file (
    document_id INTEGER PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    bytes_hash  TEXT NOT NULL,   -- sha256 of the file's bytes
    read_key    TEXT NOT NULL,
    -- The folder the file was added from, which its document's path is relative to (the
    -- add-order rule, kbmcp/service/ingest_places.py); '' for a file named directly; NULL when
    -- not recorded (then it is inferred as the source minus the path).
    folder      TEXT,
    -- When the signature was taken (ns since the epoch). A file modified less than a timestamp
    -- granularity before it (2 s: FAT's) could change again without its size or mtime changing,
    -- so such a signature is not trusted: the bytes are hashed instead ("racy clean", as git).
    checked_ns  INTEGER NOT NULL
);
