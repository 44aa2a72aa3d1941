"""Telling a PostgreSQL URL from a file path: the one check every entry point uses.

`--db`, `KBMCP_DB` and the arguments of `kbmcp copy` take either a file path or a URL
`postgresql://user:password@host:port/database?options` (libpq's form; `postgres://` too). This
module imports no driver, so a file path never loads psycopg.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    """True for a `postgresql://` or `postgres://` URL (any letter case), False for anything
    else, e.g. a file path (even one named like a URL without the two slashes)."""
    return isinstance(target, str) and target.strip().lower().startswith(SCHEMES)


def shown_url(url: str) -> str:
    """The URL as messages show it: any password replaced by `***` (a URL is often pasted with
    one, and errors end up in logs)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "postgresql://…"
    if not parts.password:
        return url.strip()
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
