"""Tenants, knowledge bases, shares, tokens and readable sets through the service functions, on
both store backends (kbmcp/store/grants.py, kbmcp/store/catalog.py): the same calls give the
same answers on an SQLite file and on a PostgreSQL database."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from kbmcp.access import (
    KNOWLEDGE_READ,
    MEMORY_READ,
    principal_for_secret,
    readable,
    readable_kb_ids,
)
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.server.auth import StoreTokenVerifier
from kbmcp.service.tenants import (
    act_as_tenant,
    create_knowledge_base,
    create_tenant,
    list_knowledge_base_records,
    list_tenants,
    share_knowledge_base,
    unshare_knowledge_base,
)
from kbmcp.service.tokens import count_usable_tokens, create_token, list_tokens, revoke_token
from kbmcp.store.catalog import DOCUMENTS, MEMORIES
from kbmcp.workspace import Workspace


def ids_of(ws: Workspace, *owned: tuple[str, str]) -> list[int]:
    """Row ids of knowledge bases given as (owner, name), ascending."""
    rows = ws.conn.execute(
        "SELECT t.name, kb.name, kb.id FROM knowledge_base AS kb JOIN tenant AS t"
        " ON t.id = kb.tenant_id"
    ).fetchall()
    by_name = {(owner, name): row_id for owner, name, row_id in rows}
    return sorted(by_name[pair] for pair in owned)


def world(ws: Workspace) -> None:
    """Three tenants (names out of byte order on purpose), knowledge bases of the same name
    under two of them, one shared."""
    admin = ws.local_principal()
    for name in ("beta", "Zed", "alpha"):
        create_tenant(ws, admin, name)
    create_knowledge_base(ws, admin, "docs", tenant="alpha", description="alpha's docs")
    create_knowledge_base(ws, admin, "docs", tenant="beta")
    create_knowledge_base(ws, admin, "notes", tenant="beta")
    create_knowledge_base(ws, admin, "Wiki", tenant="beta")
    assert share_knowledge_base(ws, admin, "notes", tenant="alpha").changed


def test_tenants_and_knowledge_bases_are_listed_alike(backend_workspace: Workspace) -> None:
    ws = backend_workspace
    world(ws)
    admin = ws.local_principal()
    tenants = [
        (t.name, t.knowledge_base_count, t.active_token_count) for t in list_tenants(ws, admin)
    ]
    # Byte order: upper case first, as SQLite's BINARY collation orders them.
    assert tenants == [("Zed", 0, 0), ("alpha", 1, 0), ("beta", 3, 0), ("local", 0, 0)]
    records = [(r.owner, r.name, r.shared_with) for r in list_knowledge_base_records(ws, admin)]
    assert records == [
        ("alpha", "docs", []),
        ("beta", "Wiki", []),
        ("beta", "docs", []),
        ("beta", "notes", ["alpha"]),
    ]
    seen_by_alpha = list_knowledge_base_records(ws, admin, tenant="alpha")
    assert [(r.owner, r.name) for r in seen_by_alpha] == [("alpha", "docs"), ("beta", "notes")]
    assert seen_by_alpha[0].description == "alpha's docs"


def test_names_are_checked_the_same_way(backend_workspace: Workspace) -> None:
    ws = backend_workspace
    world(ws)
    admin = ws.local_principal()
    with pytest.raises(InvalidRequest, match="already exists"):
        create_tenant(ws, admin, "alpha")
    with pytest.raises(InvalidRequest, match="already has a knowledge base"):
        create_knowledge_base(ws, admin, "docs", tenant="alpha")
    with pytest.raises(InvalidRequest, match="looks like an id"):
        create_knowledge_base(ws, admin, "kb_0123456789abcdef", tenant="alpha")
    with pytest.raises(InvalidRequest, match="reserved for the default memory store"):
        create_knowledge_base(ws, admin, "memories", tenant="alpha")
    with pytest.raises(ResourceUnavailable, match="no tenant named 'gamma'"):
        create_knowledge_base(ws, admin, "x", tenant="gamma")
    # `docs` is a name of two tenants' knowledge bases: sharing it by name is ambiguous.
    with pytest.raises(InvalidRequest, match="several knowledge bases are named 'docs'") as many:
        share_knowledge_base(ws, admin, "docs", tenant="Zed")
    assert len(many.value.details["ids"]) == 2
    with pytest.raises(InvalidRequest, match="owns"):
        share_knowledge_base(ws, admin, "notes", tenant="beta")


def test_a_name_taken_by_the_other_kind_is_refused(backend_workspace: Workspace) -> None:
    store, conn = backend_workspace.store, backend_workspace.conn
    with store.write_transaction(conn):
        tenant = store.catalog.ensure_tenant(conn, "t")
        memories = store.catalog.ensure_knowledge_base(conn, tenant, "journal", kind=MEMORIES)
        assert memories.kind == MEMORIES
        again = store.catalog.ensure_knowledge_base(conn, tenant, "journal", kind=MEMORIES)
        assert again == memories
        with pytest.raises(InvalidRequest, match="is the name of a memory store"):
            store.catalog.ensure_knowledge_base(conn, tenant, "journal", kind=DOCUMENTS)
    found = store.catalog.find_knowledge_base_by_id(conn, tenant, memories.public_id)
    assert found == memories
    assert store.catalog.find_tenant_by_ref(conn, tenant.public_id).name == "t"


def test_shares_take_effect_and_end(backend_workspace: Workspace) -> None:
    ws = backend_workspace
    world(ws)
    admin = ws.local_principal()
    alpha = act_as_tenant(ws, admin, "alpha")
    both = ids_of(ws, ("alpha", "docs"), ("beta", "notes"))
    assert readable_kb_ids(ws.store, ws.conn, alpha) == both
    again = share_knowledge_base(ws, admin, "notes", tenant="alpha")
    assert (again.shared, again.changed) == (True, False)
    ended = unshare_knowledge_base(ws, admin, "notes", tenant="alpha")
    assert (ended.shared, ended.changed) == (False, True)
    assert readable_kb_ids(ws.store, ws.conn, alpha) == ids_of(ws, ("alpha", "docs"))
    assert not unshare_knowledge_base(ws, admin, "notes", tenant="alpha").changed
    assert share_knowledge_base(ws, admin, "notes", tenant="alpha").changed  # re-activated
    assert readable_kb_ids(ws.store, ws.conn, alpha) == both
    # A token's allow-list narrows what its tenant can read; an empty one allows nothing.
    limited = replace(alpha, knowledge_base_allowlist=frozenset())
    assert readable_kb_ids(ws.store, ws.conn, limited) == []


def test_tokens_from_creation_to_revocation(backend_workspace: Workspace) -> None:
    ws = backend_workspace
    world(ws)
    admin = ws.local_principal()
    made = create_token(
        ws, admin, tenant="alpha", scopes=[MEMORY_READ, KNOWLEDGE_READ], knowledge_bases=["notes"]
    )
    other = create_token(ws, admin, tenant="beta", scopes=[KNOWLEDGE_READ], name="ci")
    assert made.token.scopes == [KNOWLEDGE_READ, MEMORY_READ]
    assert made.token.status == "active" and count_usable_tokens(ws, admin) == 2
    principal = principal_for_secret(ws.store, ws.conn, made.secret)
    assert principal is not None and principal.token_id == made.token.token_id
    assert principal.knowledge_base_allowlist == frozenset(made.token.knowledge_base_ids or ())
    can_read = readable(ws.store, ws.conn, principal)
    assert can_read.knowledge_base_ids == ids_of(ws, ("beta", "notes"))
    assert can_read.memory_store_ids == []
    listed = list_tokens(ws, admin)
    assert {t.token_id for t in listed} == {made.token.token_id, other.token.token_id}
    assert listed == sorted(listed, key=lambda t: (t.created_at, t.token_id))
    assert [t.name for t in list_tokens(ws, admin, tenant="beta")] == ["ci"]
    assert [t.name for t in list_tenants(ws, admin) if t.active_token_count] == ["alpha", "beta"]
    with pytest.raises(ResourceUnavailable, match="knowledge_bases"):
        create_token(ws, admin, tenant="Zed", scopes=[KNOWLEDGE_READ], knowledge_bases=["notes"])

    revoked = revoke_token(ws, admin, made.token.token_id)
    assert revoked.status == "revoked" and revoked.revoked_at is not None
    assert revoke_token(ws, admin, made.token.token_id).revoked_at == revoked.revoked_at
    assert principal_for_secret(ws.store, ws.conn, made.secret) is None
    assert count_usable_tokens(ws, admin) == 1
    # Expired: judged against the stored time (ISO text compared as SQLite compares it).
    ws.conn.execute("UPDATE token SET expires_at = '2000-01-01T00:00:00Z'")
    assert principal_for_secret(ws.store, ws.conn, other.secret) is None
    assert count_usable_tokens(ws, admin) == 0
    assert {t.token_id: t.status for t in list_tokens(ws, admin)} == {
        made.token.token_id: "revoked",
        other.token.token_id: "expired",
    }


def test_the_local_owner_is_recorded_once(backend_workspace: Workspace) -> None:
    first = backend_workspace.local_principal()
    second = backend_workspace.local_principal()
    assert first == second and first.tenant_id > 0
    assert [t.name for t in list_tenants(backend_workspace, first)] == ["local"]


def test_a_revocation_through_one_process_holds_in_another(backend_db: Path | str) -> None:
    """Two workspaces on one database (two servers): nothing is cached, so a token revoked
    through one is refused by the other on its next check."""
    settings = Settings(db=backend_db, embedder="hash")
    with (
        Workspace(settings, embedder=HashingEmbedder()) as one,
        Workspace(settings, embedder=HashingEmbedder()) as two,
    ):
        admin = one.local_principal()
        create_tenant(one, admin, "alpha")
        made = create_token(one, admin, tenant="alpha", scopes=[KNOWLEDGE_READ])
        verifier = StoreTokenVerifier(two)
        assert asyncio.run(verifier.verify_token(made.secret)) is not None
        revoke_token(one, admin, made.token.token_id)
        assert asyncio.run(verifier.verify_token(made.secret)) is None
        assert principal_for_secret(two.store, two.conn, made.secret) is None


def test_the_token_check_survives_a_dropped_connection(fresh_postgres_url: str) -> None:
    import psycopg

    settings = Settings(db=fresh_postgres_url, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), create=True) as ws:
        admin = ws.local_principal()
        create_tenant(ws, admin, "dropped")
        made = create_token(ws, admin, tenant="dropped", scopes=[KNOWLEDGE_READ])
        verifier = StoreTokenVerifier(ws)
        pid = ws.conn.info.backend_pid  # (the verifier runs on this thread: its connection)
        with psycopg.connect(fresh_postgres_url, autocommit=True) as server:
            server.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert asyncio.run(verifier.verify_token(made.secret)) is not None
        assert ws.conn.info.backend_pid != pid
