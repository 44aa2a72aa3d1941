"""The PostgreSQL + pgvector backend of the store (`--db postgresql://...`).

Nothing here is imported unless a PostgreSQL URL is used: `url.py` (no driver) tells a URL from
a file path; the other modules import psycopg (`pip install "kbmcp[postgres]"`). One module per
concern, each a set of functions taking a psycopg connection, with the SQL in named constants
or numbered files under sql/.
"""
