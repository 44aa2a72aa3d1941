"""What a store function takes as its first argument: a connection of the store's backend.

A leaf module: the concern contracts (kbmcp/store/<concern>.py), the dialects and both backends
import `Connection` from here, and kbmcp/store/backend.py builds the `Store` from the concerns,
so the contract's imports form a tree rather than a circle (tests/test_import_graph.py).
"""

from __future__ import annotations

from typing import Any, TypeAlias

# A connection of the store's backend: apsw.Connection (SQLite) or psycopg.Connection in
# autocommit mode (PostgreSQL). Only the store's own functions use what it is.
Connection: TypeAlias = Any
