"""The product's verbs: ingest, search, read, list, admin. CLI and MCP both call these."""
