"""The id key concern of the store contract: the database's key for public ids (kbmcp/ids.py
says why ids are keyed). Created once, in the transaction that creates the database's tables,
and read by every write that makes a public id.

Implemented by kbmcp/store/sqlite/id_key.py and kbmcp/store/postgres/id_key.py: their statements
under `SqlIdKeys`, the logic both share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from kbmcp.clock import now_iso
from kbmcp.errors import StoreError
from kbmcp.ids import IdKey, new_id_key

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection


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


class SqlIdKeys:
    """The id keys (the `IdKeys` Protocol) over a backend's statements: a backend subclasses it
    with SELECT_ID_KEY, SELECT_ID_KEY_INFO and INSERT_ID_KEY (which keeps the first key when two
    processes create the database at once) and may word the error of a database without one."""

    SELECT_ID_KEY: ClassVar[str]
    SELECT_ID_KEY_INFO: ClassVar[str]
    INSERT_ID_KEY: ClassVar[str]

    def ensure_id_key(self, conn: Connection) -> None:
        if conn.execute(self.SELECT_ID_KEY).fetchone() is not None:
            return
        made = new_id_key()
        conn.execute(
            self.INSERT_ID_KEY,
            {"key": made.key, "origin": "pinned" if made.pinned else "random", "now": now_iso()},
        )

    def id_key_of(self, conn: Connection) -> IdKey:
        row = conn.execute(self.SELECT_ID_KEY).fetchone()
        if row is None:
            # Only a database opened without migrations (or read-only before its first writable
            # open finished) can lack one; making unkeyed ids would be the leak the key exists
            # to stop.
            raise self.missing_key(conn)
        return IdKey(bytes(row[0]))

    def id_key_info(self, conn: Connection) -> IdKeyInfo | None:
        row = conn.execute(self.SELECT_ID_KEY_INFO).fetchone()
        return None if row is None else IdKeyInfo(row[0], bool(row[1]), row[2])

    def missing_key(self, conn: Connection) -> StoreError:
        return StoreError("this database has no id key yet: open it once with write access")
