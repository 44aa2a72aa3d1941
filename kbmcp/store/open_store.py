"""Opening the store a settings object names: a PostgreSQL URL or a knowledge-base file.

Apart from the contract (kbmcp/store/backend.py) because it is the one place that knows both
backends: the contract is imported by every concern module, and a contract that imported the
backends would close an import circle through all of them (tests/test_import_graph.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbmcp.errors import InvalidRequest

if TYPE_CHECKING:
    from kbmcp.config import Settings
    from kbmcp.store.backend import Store


def open_store(settings: Settings) -> Store:
    """The store of `settings.db`: a PostgreSQL URL or a file path. Opens no connection; the
    PostgreSQL driver is imported only for a URL."""
    if settings.is_postgres:
        if settings.immutable:
            # Reading without locks is a promise about a file nobody writes; a database server
            # has no such mode, and silently ignoring the promise would hide a mistake.
            raise InvalidRequest(
                "--immutable / KBMCP_IMMUTABLE applies to a knowledge-base file, not to a "
                f"PostgreSQL database ({settings.shown_db}): leave it off, or use a role that "
                "can only read",
                details={"argument": "immutable"},
            )
        from kbmcp.store.postgres.store import PostgresStore

        return PostgresStore(str(settings.db))
    from kbmcp.store.sqlite.store import SqliteStore

    return SqliteStore(settings.db_path, immutable=settings.immutable)
