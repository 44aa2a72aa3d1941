"""The search engine: scope resolution, the keyword and vector channels, fusion and excerpts.

`kbmcp.service.search.search` is the entry point; the modules here each do one job:

- `query_text`: user text -> quoted FTS5 terms (never raw MATCH syntax);
- `scope`: request validation and the allowed-set SQL (scope before limit);
- `lexical`: FTS5 bm25 candidates inside the scope;
- `semantic`: cosine candidates inside the scope (exact scan or binary index + exact re-rank);
- `fusion`: hybrid (alpha-weighted min-max) and RRF, deterministic ties;
- `excerpt`: a bounded passage around the best match.
"""
