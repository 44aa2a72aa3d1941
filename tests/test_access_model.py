"""Principals, tokens and grants below the HTTP layer: the service functions, the scope guard
in-process, stdio with KBMCP_TOKEN, and the document owner (its knowledge base's, migration 8)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from kbmcp import clock
from kbmcp.access import KNOWLEDGE_WRITE, Principal, principal_for_secret, readable_kb_ids
from kbmcp.clock import format_timestamp, parse_timestamp
from kbmcp.errors import Forbidden, InvalidRequest, ResourceUnavailable
from kbmcp.server import scope_guard
from kbmcp.server.app import build_server
from kbmcp.service.admin import doctor
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.listing import list_knowledge_bases
from kbmcp.service.tenants import create_tenant, share_knowledge_base, unshare_knowledge_base
from kbmcp.service.tokens import count_usable_tokens, create_token, list_tokens, revoke_token
from kbmcp.store.sqlite import migrations
from kbmcp.store.sqlite.connection import open_connection
from tests.access_support import build_two_tenants, expire_token, make_token
from tests.mcp_support import T0, T1, T2, hash_workspace, payload, stdio_params, write


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "kb.db"
    build_two_tenants(tmp_path, path)
    return path


def principal(db: Path, secret: str) -> Principal:
    with hash_workspace(db) as ws:
        found = principal_for_secret(ws.store, ws.conn, secret)
    assert found is not None
    return found


def kb_names(db: Path, who: Principal) -> list[str]:
    with hash_workspace(db) as ws:
        return [kb.name for kb in list_knowledge_bases(ws, who)]


def test_a_single_user_file_needs_no_setup(tmp_path: Path) -> None:
    source = write(tmp_path / "src", {"a.md": "# A\n\nalpha\n"})
    with hash_workspace(tmp_path / "solo.db") as ws:
        owner = ws.local_principal()
        add_paths(ws, owner, [source], IngestOptions(knowledge_base="notes"))
        assert [kb.name for kb in list_knowledge_bases(ws, owner)] == ["notes"]
        assert owner.token_id is None and KNOWLEDGE_WRITE in owner.scopes


def test_a_read_only_token_cannot_write(db: Path, tmp_path: Path) -> None:
    _, secret = make_token(db, "beta", ["knowledge:read"])
    reader = principal(db, secret)
    source = write(tmp_path / "new", {"x.md": "# X\n\nnew text\n"})
    with hash_workspace(db) as ws:
        before = ws.conn.execute("SELECT count(*) FROM document").fetchone()[0]
        with pytest.raises(Forbidden) as refused:
            add_paths(ws, reader, [source], IngestOptions(knowledge_base="beta-docs"))
        assert refused.value.details == {"required_scope": "knowledge:write"}
        assert ws.conn.execute("SELECT count(*) FROM document").fetchone()[0] == before
    _, writer_secret = make_token(db, "beta", ["knowledge:read", "knowledge:write"])
    with hash_workspace(db) as ws:
        report = add_paths(
            ws, principal(db, writer_secret), [source], IngestOptions(knowledge_base="beta-docs")
        )
        assert report.added == 1


def test_no_token_can_administer_the_file(db: Path) -> None:
    _, secret = make_token(
        db, "acme", ["knowledge:read", "knowledge:write", "memory:read", "memory:write"]
    )
    everything = principal(db, secret)
    with hash_workspace(db) as ws:
        with pytest.raises(Forbidden):
            create_tenant(ws, everything, "mallory")
        with pytest.raises(Forbidden):
            share_knowledge_base(ws, everything, "acme-ops", tenant="beta")
        with pytest.raises(Forbidden):
            create_token(ws, everything, tenant="acme", scopes=["knowledge:read"])
        with pytest.raises(Forbidden):
            doctor(ws, everything)  # it describes the whole file, every tenant's counts
        assert doctor(ws, ws.local_principal())["counts"]["documents"] == 3


def test_tokens_stop_working_when_expired_or_revoked(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_id, secret = make_token(db, "beta", ["knowledge:read"], expires_days=1)
    with hash_workspace(db) as ws:
        with ws.conn:
            ws.conn.execute(
                "UPDATE token SET expires_at = ? WHERE public_id = ?",
                (format_timestamp(parse_timestamp(T1)), token_id),
            )
        # The machine's clock (token expiry never reads KBMCP_NOW), moved across the expiry.
        machine = {"time": parse_timestamp(T0)}
        monkeypatch.setattr(clock, "system_now", lambda: machine["time"])
        assert principal_for_secret(ws.store, ws.conn, secret) is not None
        machine["time"] = parse_timestamp(T1)  # exactly the expiry instant: expired
        assert principal_for_secret(ws.store, ws.conn, secret) is None
        machine["time"] = parse_timestamp(T2)
        assert principal_for_secret(ws.store, ws.conn, secret) is None
    monkeypatch.undo()
    other_id, other = make_token(db, "beta", ["knowledge:read"])
    with hash_workspace(db) as ws:
        assert principal_for_secret(ws.store, ws.conn, other) is not None
        revoke_token(ws, ws.local_principal(), other_id)
        assert principal_for_secret(ws.store, ws.conn, other) is None
        for bad in ("", "kbmcp_", other.upper(), other[:-1], other + "x", " " * 3):
            assert principal_for_secret(ws.store, ws.conn, bad) is None


def test_kbmcp_now_never_decides_whether_a_token_is_expired(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KBMCP_NOW pins recorded times, decay and scans; token expiry always reads the machine's
    clock, so a pinned clock neither revives an expired token nor expires a valid one."""
    _, valid = make_token(db, "beta", ["knowledge:read"], expires_days=1)
    expired_id, expired = make_token(db, "beta", ["knowledge:read"], expires_days=1)
    expire_token(db, expired_id)
    with hash_workspace(db) as ws:
        for pinned in ("2020-01-01T00:00:00Z", "2100-01-01T00:00:00Z"):
            monkeypatch.setenv("KBMCP_NOW", pinned)
            assert principal_for_secret(ws.store, ws.conn, valid) is not None, pinned
            assert principal_for_secret(ws.store, ws.conn, expired) is None, pinned
            statuses = {t.token_id: t.status for t in list_tokens(ws, ws.local_principal())}
            assert statuses[expired_id] == "expired", pinned
            assert count_usable_tokens(ws, ws.local_principal()) == 1, pinned


def test_an_allow_list_is_intersected_with_shares_in_force(db: Path) -> None:
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        with pytest.raises(ResourceUnavailable, match="no knowledge base named or with id"):
            create_token(
                ws, admin, tenant="beta", scopes=["knowledge:read"], knowledge_bases=["acme-ops"]
            )
        share_knowledge_base(ws, admin, "acme-ops", tenant="beta")
        created = create_token(
            ws, admin, tenant="beta", scopes=["knowledge:read"], knowledge_bases=["acme-ops"]
        )
    limited = principal(db, created.secret)
    assert kb_names(db, limited) == ["acme-ops"]
    with hash_workspace(db) as ws:
        unshare_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
        # The allow-list names a knowledge base the tenant no longer reads: nothing is readable,
        # and an allow-list never widens to "everything".
        assert readable_kb_ids(ws.store, ws.conn, limited) == []
    assert kb_names(db, limited) == []


def test_scope_checks_reject_bad_token_arguments(db: Path) -> None:
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        for kwargs, argument in (
            ({"scopes": []}, "scopes"),
            ({"scopes": ["knowledge:read", "kbmcp:admin"]}, "scopes"),
            ({"scopes": ["knowledge:read"], "expires_days": 0}, "expires_days"),
            ({"scopes": ["knowledge:read"], "expires_days": True}, "expires_days"),
        ):
            with pytest.raises(InvalidRequest) as error:
                create_token(ws, admin, tenant="beta", **kwargs)
            assert error.value.details["argument"] == argument
        assert ws.conn.execute("SELECT count(*) FROM token").fetchone()[0] == 0


@pytest.mark.anyio
async def test_tools_a_principal_cannot_use_are_hidden_and_refused(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def probe_write(text: str) -> str:
        calls.append(text)
        return text

    monkeypatch.setitem(scope_guard.TOOL_SCOPES, "probe_write", (KNOWLEDGE_WRITE,))

    class Fixed:
        def __init__(self, who: Principal) -> None:
            self.who = who

        def current(self) -> Principal:
            return self.who

    _, read_secret = make_token(db, "beta", ["knowledge:read"])
    _, write_secret = make_token(db, "beta", ["knowledge:read", "knowledge:write"])
    for secret, allowed in ((read_secret, False), (write_secret, True)):
        with hash_workspace(db) as ws:
            server = build_server(ws, principals=Fixed(principal(db, secret)))
            server.add_tool(probe_write, name="probe_write")
            async with Client(server) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert ("probe_write" in names) is allowed
                result = await client.call_tool("probe_write", {"text": "hi"})
                if allowed:
                    assert not result.is_error
                else:
                    assert payload(result)["error"]["code"] == "forbidden"
    assert calls == ["hi"]


@pytest.mark.anyio
async def test_stdio_runs_as_kbmcp_token_and_honours_revocation(db: Path) -> None:
    token_id, secret = make_token(db, "acme", ["knowledge:read"], knowledge_bases=["acme-notes"])
    async with Client(stdio_params(db, KBMCP_TOKEN=secret)) as client:
        listed = payload(await client.call_tool("list_knowledge_bases", {}))
        assert [kb["name"] for kb in listed["knowledge_bases"]] == ["acme-notes"]
        with hash_workspace(db) as ws:
            revoke_token(ws, ws.local_principal(), token_id)
        refused = payload(await client.call_tool("list_knowledge_bases", {}))
        assert refused["error"]["code"] == "forbidden"
        assert (await client.list_tools()).tools == []


def test_migration_5_fills_the_owner_of_existing_documents(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = open_connection(path, apply_migrations=False)
    migrations.migrate(conn, target=4)
    conn.execute(
        """INSERT INTO tenant (id, public_id, name, created_at) VALUES (7, 'ten_7', 'acme', 'x');
           INSERT INTO knowledge_base (id, public_id, tenant_id, name, created_at, updated_at)
           VALUES (3, 'kb_3', 7, 'ops', 'x', 'x');
           INSERT INTO document (public_id, knowledge_base_id, path, title, kind, created_at,
                                 updated_at)
           VALUES ('doc_1', 3, 'a.md', 'A', 'markdown', 'x', 'x');"""
    )
    migrations.migrate(conn, target=7)  # migration 8 drops the column again
    assert conn.execute("SELECT tenant_id FROM document").fetchall() == [(7,)]
    migrations.migrate(conn)
    owner = """SELECT kb.tenant_id FROM document AS d
               JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id"""
    assert conn.execute(owner).fetchall() == [(7,)]
    conn.close()
