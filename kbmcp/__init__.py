"""kbmcp: a local-first knowledge base for AI agents in one SQLite file, served over MCP."""

__version__ = "0.1.0"
