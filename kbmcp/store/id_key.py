"""The id key concern of the store contract: the database's key for public ids (kbmcp/ids.py
says why ids are keyed). Created once, in the transaction that creates the database's tables,
and read by every write that makes a public id.

Implemented by kbmcp/store/sqlite/id_key.py and kbmcp/store/postgres/id_key.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kbmcp.ids import IdKey

if TYPE_CHECKING:
    from kbmcp.store.backend import Connection


@dataclass(frozen=True)
class IdKeyInfo:
    origin: str  # 'random', or 'pinned' by KBMCP_TEST_ID_KEY
    unkeyed_before: bool  # the database has ids made before it had a key
    created_at: str


class IdKeys(Protocol):
    def ensure_id_key(self, conn: Connection) -> None:
        """Give a writable, migrated database its id key if it has none (one indexed read when
        it has one)."""
        ...

    def id_key_of(self, conn: Connection) -> IdKey:
        """The key every public id of this database is made with; a StoreError if it has none
        (opened without migrations, or read-only before its first writable open)."""
        ...

    def id_key_info(self, conn: Connection) -> IdKeyInfo | None:
        """Where the key came from (`kbmcp doctor`); None without a key."""
        ...
