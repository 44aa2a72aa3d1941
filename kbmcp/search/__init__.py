"""The search engine: scope first, then rank, then limit, in one SQL statement.

`kbmcp.service.search.search` validates, resolves the principal and embeds the query; everything
after that is here. Modules, in the order a search uses them:

- `models`: the request, filters, results and stats (the contract with the CLI and MCP);
- `request`: argument validation that needs no database (the single validator of arguments);
- `query_text`: user text -> quoted FTS5 terms (never raw MATCH syntax);
- `scope`: filter validation and the scope SQL (which indexed chunks a request may see);
- `plan`: one strategy per channel, chosen once per request from one threshold each;
- `engine`: runs one search: scope -> plan -> channel sources -> ranking -> excerpts;
- `ranking`: THE ranking statement: scope CTE, channel candidates, ranks, fusion, ties, limit;
- `lexical/`: the keyword channel
  - `fts`: FTS5 SQL (the plain path), weights, tokenizer, stop-word pruning;
  - `bm25`: FTS5's bm25 reproduced bit for bit, and the index statistics it needs;
  - `stats`: bm25's statistics over the caller's readable set (what it may read), not the file;
  - `readable_fts`: the FTS5 path re-scored with those statistics (no accelerators);
  - `postings` (accelerator): per-term bm25 contributions for large scopes;
  - `scan` (accelerator): bm25 over the text of a small scope;
  - `tokens` (accelerator): tokenised chunks kept for the scan;
- `vector/`: the semantic channel
  - `sql`: sqlite-vec SQL (the plain path, and the exact re-scoring of accelerator pools);
  - `matrix` (accelerator): every indexed vector in memory, updated in place on writes;
  - `candidates` (accelerator): exact candidate pools from the matrix;
- `accelerator`: the accelerators a long-lived workspace owns, and their freshness check;
- `top_k`: the best k of scored rows with the exact tie-break;
- `sorted_ids`: looking chunk ids up in the accelerators' ascending row tables;
- `excerpt`: a bounded passage around the best match.
"""
