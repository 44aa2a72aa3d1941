"""The audit trail (kbmcp/service/audit.py): a scripted session of writes and refused calls, over
the CLI and a real `kbmcp serve --http`, read back with `kbmcp audit` on both backends; query
texts only when asked for; retention; searches never write to the database themselves."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from kbmcp.access import local_principal
from kbmcp.clock import format_timestamp, system_now
from kbmcp.config import Settings, load_settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.server.app import build_server
from kbmcp.service.audit import AuditTrail, parse_since, read_trail
from kbmcp.store.audit import NewAuditEvent
from kbmcp.workspace import Workspace
from tests.access_support import connect_with_token
from tests.cli_support import Run
from tests.mcp_support import HttpServer, payload, write

pytestmark = pytest.mark.anyio


def _events(kbmcp: Callable[..., Run], db: Path | str, *args: str) -> list[dict[str, Any]]:
    run = kbmcp("--db", db, "audit", "--json", *args)
    assert run.code == 0, run.err
    return run.json()["events"]  # type: ignore[index, no-any-return]


def _token(kbmcp: Callable[..., Run], db: Path | str, tenant: str, *scopes: str) -> tuple[str, str]:
    args = [arg for scope in scopes for arg in ("--scope", scope)]
    run = kbmcp("--db", db, "token", "create", "--tenant", tenant, *args, "--json")
    assert run.code == 0, run.err
    created = run.json()
    return created["token"]["token_id"], created["secret"]  # type: ignore[index]


def _one(events: list[dict[str, Any]], **wanted: Any) -> dict[str, Any]:
    found = [e for e in events if all(e.get(key) == value for key, value in wanted.items())]
    assert len(found) == 1, (wanted, events)
    return found[0]


async def test_a_scripted_session_leaves_its_trail(
    kbmcp: Callable[..., Run], backend_db: Path | str, tmp_path: Path
) -> None:
    db = backend_db
    docs = write(tmp_path / "docs", {"deploy.md": "# Deploy\n\nDeploy keys rotate monthly.\n"})
    assert kbmcp("--db", db, "add", docs, "--kb", "handbook").code == 0
    local_doc = kbmcp("--db", db, "ls", "handbook", "--json").json()["documents"][0]  # type: ignore[index]
    assert kbmcp("--db", db, "tenant", "create", "acme").code == 0
    assert kbmcp("--db", db, "tenant", "create", "beta").code == 0
    acme_id, acme_secret = _token(kbmcp, db, "acme", "memory:write", "memory:read")
    beta_id, beta_secret = _token(kbmcp, db, "beta", "knowledge:read")
    gone_id, gone_secret = _token(kbmcp, db, "beta", "knowledge:read")
    assert kbmcp("--db", db, "token", "revoke", gone_id).code == 0

    server = HttpServer(db)  # type: ignore[arg-type]
    try:
        async with connect_with_token(server.url, acme_secret) as acme:
            made = payload(await acme.call_tool("remember", {"content": "Staging is on port 8443"}))
            memory_id = made["memory_id"]
            for _ in range(3):
                assert not (await acme.call_tool("search_knowledge", {"query": "port"})).is_error
            gone = await acme.call_tool("forget", {"memory_id": memory_id})
            assert not gone.is_error
        async with connect_with_token(server.url, beta_secret) as beta:
            refused = await beta.call_tool("remember", {"content": "beta was here"})
            assert payload(refused)["error"]["code"] == "forbidden"
            foreign = await beta.call_tool(
                "search_knowledge", {"document_id": local_doc["document_id"]}
            )
            assert payload(foreign)["error"]["code"] == "resource_unavailable"
        for secret in (gone_secret, "not-a-token"):
            async with httpx2.AsyncClient() as http:
                answer = await http.post(
                    server.url,
                    headers={"Authorization": f"Bearer {secret}"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                )
            assert answer.status_code == 401
    finally:
        server.stop()  # SIGTERM: the server writes what its trail still holds (the searches)

    events = _events(kbmcp, db)
    cli = [(e["via"], e["action"], e["outcome"]) for e in events if e["via"] == "cli"]
    assert cli == [
        ("cli", "add", "ok"),
        ("cli", "tenant create", "ok"),
        ("cli", "tenant create", "ok"),
        ("cli", "token create", "ok"),
        ("cli", "token create", "ok"),
        ("cli", "token create", "ok"),
        ("cli", "token revoke", "ok"),
    ]
    assert _one(events, action="token revoke")["objects"] == [gone_id]
    http = [e for e in events if e["via"] == "http"]
    remembered = _one(http, action="remember", outcome="ok")
    assert (remembered["tenant"], remembered["token_id"]) == ("acme", acme_id)
    assert memory_id in remembered["objects"]
    assert memory_id in _one(http, action="forget", outcome="ok")["objects"]
    searches = _one(http, action="search_knowledge", outcome="ok")
    assert (searches["token_id"], searches["count"], searches["detail"]) == (acme_id, 3, {})
    assert _one(http, action="remember", outcome="forbidden")["token_id"] == beta_id
    unavailable = _one(http, action="search_knowledge", outcome="resource_unavailable")
    assert (unavailable["tenant"], unavailable["token_id"]) == ("beta", beta_id)
    assert unavailable["objects"] == [local_doc["document_id"]]
    revoked = _one(http, outcome="unauthorized", token_id=gone_id)
    assert (revoked["tenant"], revoked["detail"]) == ("beta", {"reason": "revoked"})
    stranger = _one(http, outcome="unauthorized", token_id=None)
    assert (stranger["tenant"], stranger["detail"]) == (None, {"reason": "not a kbmcp token"})
    # never a secret, nor what was remembered (only ids)
    shown = kbmcp("--db", db, "audit", "--json").out + kbmcp("--db", db, "audit").out
    for secret in (acme_secret, beta_secret, gone_secret, "Staging is on port"):
        assert secret not in shown

    # the filters
    assert {e["token_id"] for e in _events(kbmcp, db, "--token", acme_id)} == {acme_id}
    assert {e["tenant"] for e in _events(kbmcp, db, "--tenant", "beta")} == {"beta"}
    assert _events(kbmcp, db, "--since", "2999-01-01") == []
    assert len(_events(kbmcp, db, "--since", "1h")) == len(events)
    newest = _events(kbmcp, db, "--limit", "2")
    assert newest == events[-2:]
    lines = kbmcp("--db", db, "audit", "--token", acme_id).out.splitlines()
    assert any(f"{acme_id}  search_knowledge x3  ok" in line for line in lines), lines


async def test_query_texts_are_kept_only_when_asked_for(
    backend_db: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for opted_in in (False, True):
        monkeypatch.setenv("KBMCP_AUDIT_QUERIES", "1" if opted_in else "0")
        settings = load_settings().with_db(backend_db)
        with Workspace(settings, embedder=HashingEmbedder()) as ws:
            from mcp import Client

            async with Client(build_server(ws)) as client:
                await client.call_tool("search_knowledge", {"query": "secret project kestrel"})
        with Workspace(settings, embedder=HashingEmbedder()) as ws:
            entries = read_trail(ws, ws.local_principal())
        details = [e.detail for e in entries if e.action == "search_knowledge"]
        assert details[-1] == ({"query": "secret project kestrel"} if opted_in else {})


def test_searches_are_counted_in_memory_and_written_in_one_row(
    backend_workspace: Workspace,
) -> None:
    """A search adds to a count held in memory: the database is written at the next flush,
    once, however many searches there were (a search never waits for the audit)."""
    ws = backend_workspace
    trail = AuditTrail(ws, "stdio", flush_seconds=3600)
    owner = ws.local_principal()
    for _ in range(50):
        trail.count_search(owner, "ignored")
    assert read_trail(ws, owner) == []
    trail.flush()
    (entry,) = read_trail(ws, owner)
    assert (entry.action, entry.count, entry.detail, entry.token_id) == (
        "search_knowledge",
        50,
        {},
        None,
    )
    trail.close()


def test_old_rows_go_after_the_retention(backend_db: Path | str) -> None:
    settings = Settings(db=backend_db, embedder="hash", audit_retention_days=30)
    with Workspace(settings, embedder=HashingEmbedder()) as ws:
        old = format_timestamp(system_now().replace(year=2000))
        with ws.lock, ws.store.write_transaction(ws.conn):
            ws.store.audit.append(
                ws.conn, [NewAuditEvent(0, old, None, "cli", "add", "ok", "[]", "{}")]
            )
        owner = local_principal(ws.store, ws.conn, ws.lock)
        assert [e.at for e in read_trail(ws, owner)] == [old]
        trail = AuditTrail(ws, "cli", background=False)
        trail.record(owner, "kb create")
        assert [e.action for e in read_trail(ws, owner)] == ["kb create"]


def test_a_trail_that_cannot_be_written_never_fails_the_write(
    tmp_path: Path, kbmcp: Callable[..., Run]
) -> None:
    """A read-only file: the command answers as before, the trail says why it has nothing."""
    db = tmp_path / "kb.db"
    assert kbmcp("--db", db, "tenant", "create", "acme").code == 0
    settings = Settings(db=db, embedder="hash", immutable=True)
    with Workspace(settings, embedder=HashingEmbedder(), create=False) as ws:
        trail = AuditTrail(ws, "cli", background=False)
        trail.record(ws.local_principal(), "remember")  # logged, not raised
    assert [e["action"] for e in _events(kbmcp, db)] == ["tenant create"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [("yesterday", "since: 'yesterday'"), ("7 weeks ago", "since: '7 weeks ago'")],
)
def test_a_bad_since_is_one_clear_error(text: str, problem: str, kbmcp: Callable[..., Run]) -> None:
    run = kbmcp("audit", "--since", text)
    assert run.code == 1 and problem in run.err and "Traceback" not in run.err
    assert parse_since("2026-01-02") == "2026-01-02T00:00:00.000000Z"


def test_the_trail_is_json_all_the_way(kbmcp: Callable[..., Run], tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    assert kbmcp("--db", db, "remember", "a fact", "--tag", "topic=x").code == 0
    (event,) = _events(kbmcp, db)
    assert json.loads(json.dumps(event)) == event
    assert event["action"] == "remember" and event["tenant"] == "local"


def test_the_trail_moves_with_kbmcp_copy_and_records_it(
    kbmcp: Callable[..., Run], tmp_path: Path, new_postgres_url: str
) -> None:
    db, back = tmp_path / "kb.db", tmp_path / "back.db"
    assert kbmcp("--db", db, "remember", "a fact", "--tag", "topic=x").code == 0
    assert kbmcp("--db", db, "tenant", "create", "acme").code == 0
    assert kbmcp("copy", db, new_postgres_url).code == 0
    assert kbmcp("copy", new_postgres_url, back).code == 0
    there = _events(kbmcp, new_postgres_url)
    assert [(e["action"], e["outcome"]) for e in there] == [
        ("remember", "ok"),
        ("tenant create", "ok"),
        ("copy", "ok"),
    ]
    assert there[-1]["tenant"] is None and there[-1]["detail"]["source"] == str(db)
    assert _events(kbmcp, back)[:3] == there
    refused = kbmcp("copy", db, back)  # not empty: refused, and recorded there
    assert refused.code == 1
    assert _events(kbmcp, back)[-1]["outcome"] == "store_error"
