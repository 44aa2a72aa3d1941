-- Migration 3: an index on document paths, for the path-prefix search filter.

-- The filter `document_paths` (kbmcp/search/scope.py) reads each prefix as the range
-- path >= prefix AND path < prefix || char(0x10FFFF), a search of this index instead of a scan of
-- every document (100k chunks, a 100-chunk prefix: 2.0 ms -> 0.03 ms). The existing
-- UNIQUE (knowledge_base_id, path) index cannot serve it: it starts with the knowledge base.
CREATE INDEX document_by_path ON document(path);
