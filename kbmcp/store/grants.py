"""The grants concern of the store contract: who may read what (readable sets, token lookup),
shares of knowledge bases between tenants, bearer tokens, and the administrator's listings of
tenants and knowledge bases.

Implemented by kbmcp/store/sqlite/grants.py and kbmcp/store/postgres/grants.py, their statements
under `SqlGrants`, the logic both share. Nothing here is
cached by either: every request reads shares and tokens again, so a revocation made through
one process (or server) is in force on the next request of every other.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection
    from kbmcp.store.dialect import Dialect


@dataclass(frozen=True)
class StoredToken:
    """A token row as checking a presented secret needs it (JSON columns as text)."""

    public_id: str
    secret_hash: str
    scopes: str  # JSON array
    knowledge_base_ids: str | None  # JSON array; None: no allow-list
    expires_at: str | None
    revoked_at: str | None
    tenant_id: int
    tenant_public_id: str


@dataclass(frozen=True)
class TokenRow:
    public_id: str
    tenant: str  # the tenant's name
    name: str
    scopes: str  # JSON array
    knowledge_base_ids: str | None  # JSON array; None: no allow-list
    created_at: str
    expires_at: str | None
    revoked_at: str | None


@dataclass(frozen=True)
class NewToken:
    public_id: str
    tenant_id: int
    name: str
    secret_hash: str
    scopes: str  # JSON array
    knowledge_base_ids: str | None  # JSON array; None: no allow-list
    expires_at: str | None


@dataclass(frozen=True)
class TenantRow:
    public_id: str
    name: str
    created_at: str
    knowledge_base_count: int
    active_token_count: int  # neither revoked nor expired at the time given


@dataclass(frozen=True)
class KnowledgeBaseRow:
    public_id: str
    name: str
    description: str
    owner_public_id: str
    owner: str  # the owner tenant's name
    created_at: str
    shared_with: list[str]  # names of the tenants it is shared to now, in byte order


class Grants(Protocol):
    # ---------------------------------------------------------------- reading rights

    def readable_store_ids(
        self,
        conn: Connection,
        tenant_id: int,
        allowlist: Collection[str] | None,
        *,
        knowledge_bases: bool = True,
        memory_stores: bool = True,
    ) -> tuple[list[int], list[int]]:
        """Row ids, ascending, of (the knowledge bases the tenant owns or has shared to it (not
        revoked), narrowed to the public ids of `allowlist` when there is one (an empty one
        allows none); the tenant's own memory stores (never shared, never narrowed)), read in
        one statement. A kind not asked for (`knowledge_bases`, `memory_stores`) is empty."""
        ...

    def stored_token(self, conn: Connection, public_id: str) -> StoredToken | None:
        """The token with this public id (tok_...), whatever its state."""
        ...

    # ---------------------------------------------------------------- shares

    def share_in_force(self, conn: Connection, knowledge_base_id: int, tenant_id: int) -> bool:
        """Whether the knowledge base is shared to the tenant now."""
        ...

    def share(self, conn: Connection, knowledge_base_id: int, tenant_id: int, now: str) -> None:
        """Share (again, after a revocation: the row is re-activated with the new date)."""
        ...

    def revoke_share(
        self, conn: Connection, knowledge_base_id: int, tenant_id: int, now: str
    ) -> None: ...

    # ---------------------------------------------------------------- tokens

    def insert_token(self, conn: Connection, token: NewToken, now: str) -> None: ...

    def tokens(
        self, conn: Connection, *, tenant_id: int | None = None, public_id: str | None = None
    ) -> list[TokenRow]:
        """Tokens (of one tenant, or the one with `public_id`; else all), by creation time
        then public id."""
        ...

    def revoke_token(self, conn: Connection, public_id: str, now: str) -> None:
        """Revoke the token unless it is revoked already (the first revocation's time stays)."""
        ...

    def count_usable_tokens(self, conn: Connection, now: str) -> int:
        """Tokens neither revoked nor expired at `now`."""
        ...

    # ---------------------------------------------------------------- listings

    def tenants(self, conn: Connection, now: str) -> list[TenantRow]:
        """Every tenant by name (byte order), with its knowledge bases and usable tokens."""
        ...

    def knowledge_bases(self, conn: Connection, tenant_id: int | None) -> list[KnowledgeBaseRow]:
        """Every knowledge base with its owner and grantees, by owner name then name (byte
        order); with `tenant_id`, those that tenant can read (its own and shared to it)."""
        ...


class SqlGrants:
    """The grants concern (the `Grants` Protocol) over a backend's statements: a backend
    subclasses it with its statements (the upper-case class attributes, named parameters; a
    token's allow-list one list parameter, a knowledge base's grantees one list column) and its
    dialect."""

    dialect: ClassVar[Dialect]

    SELECT_READABLE_STORE_IDS: ClassVar[str]
    SELECT_TOKEN: ClassVar[str]
    SELECT_SHARE_IN_FORCE: ClassVar[str]
    UPSERT_SHARE: ClassVar[str]
    REVOKE_SHARE: ClassVar[str]
    INSERT_TOKEN: ClassVar[str]
    SELECT_TOKENS: ClassVar[str]
    REVOKE_TOKEN: ClassVar[str]
    COUNT_USABLE_TOKENS: ClassVar[str]
    SELECT_TENANTS: ClassVar[str]
    SELECT_KNOWLEDGE_BASES: ClassVar[str]

    # ---------------------------------------------------------------- reading rights

    def readable_store_ids(
        self,
        conn: Connection,
        tenant_id: int,
        allowlist: Collection[str] | None,
        *,
        knowledge_bases: bool = True,
        memory_stores: bool = True,
    ) -> tuple[list[int], list[int]]:
        rows = conn.execute(
            self.SELECT_READABLE_STORE_IDS,
            {
                "tenant_id": tenant_id,
                "knowledge_bases": knowledge_bases,
                "memory_stores": memory_stores,
                "allow_all": allowlist is None,
                "allowed": self.dialect.list_param(sorted(allowlist or ())),
            },
        )
        found: tuple[list[int], list[int]] = ([], [])
        for row_id, is_memory_store in rows:
            found[int(bool(is_memory_store))].append(row_id)
        return found

    def stored_token(self, conn: Connection, public_id: str) -> StoredToken | None:
        row = conn.execute(self.SELECT_TOKEN, {"public_id": public_id}).fetchone()
        return None if row is None else StoredToken(*row)

    # ---------------------------------------------------------------- shares

    def share_in_force(self, conn: Connection, knowledge_base_id: int, tenant_id: int) -> bool:
        row = conn.execute(
            self.SELECT_SHARE_IN_FORCE, {"kb_id": knowledge_base_id, "tenant_id": tenant_id}
        ).fetchone()
        return bool(row and row[0])

    def share(self, conn: Connection, knowledge_base_id: int, tenant_id: int, now: str) -> None:
        conn.execute(
            self.UPSERT_SHARE, {"kb_id": knowledge_base_id, "tenant_id": tenant_id, "now": now}
        )

    def revoke_share(
        self, conn: Connection, knowledge_base_id: int, tenant_id: int, now: str
    ) -> None:
        conn.execute(
            self.REVOKE_SHARE, {"kb_id": knowledge_base_id, "tenant_id": tenant_id, "now": now}
        )

    # ---------------------------------------------------------------- tokens

    def insert_token(self, conn: Connection, token: NewToken, now: str) -> None:
        conn.execute(
            self.INSERT_TOKEN,
            {
                "public_id": token.public_id,
                "tenant_id": token.tenant_id,
                "name": token.name,
                "secret_hash": token.secret_hash,
                "scopes": token.scopes,
                "kb_ids": token.knowledge_base_ids,
                "now": now,
                "expires_at": token.expires_at,
            },
        )

    def tokens(
        self, conn: Connection, *, tenant_id: int | None = None, public_id: str | None = None
    ) -> list[TokenRow]:
        rows = conn.execute(self.SELECT_TOKENS, {"tenant_id": tenant_id, "public_id": public_id})
        return [TokenRow(*row) for row in rows]

    def revoke_token(self, conn: Connection, public_id: str, now: str) -> None:
        conn.execute(self.REVOKE_TOKEN, {"public_id": public_id, "now": now})

    def count_usable_tokens(self, conn: Connection, now: str) -> int:
        return int(conn.execute(self.COUNT_USABLE_TOKENS, {"now": now}).fetchone()[0])

    # ---------------------------------------------------------------- listings

    def tenants(self, conn: Connection, now: str) -> list[TenantRow]:
        return [TenantRow(*row) for row in conn.execute(self.SELECT_TENANTS, {"now": now})]

    def knowledge_bases(self, conn: Connection, tenant_id: int | None) -> list[KnowledgeBaseRow]:
        rows = conn.execute(self.SELECT_KNOWLEDGE_BASES, {"tenant_id": tenant_id})
        return [KnowledgeBaseRow(*row[:6], self.dialect.array(row[6])) for row in rows]
