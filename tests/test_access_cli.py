"""`kbmcp tenant`, `kbmcp kb`, `kbmcp token`, `kbmcp add --tenant`, through the real entry point."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from kbmcp.store.sqlite.connection import open_connection
from tests.cli_support import Run, assert_one_line_error
from tests.mcp_support import write

Kbmcp = Callable[..., Run]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kb.db"


def test_tenants_knowledge_bases_and_shares(kbmcp: Kbmcp, db: Path, tmp_path: Path) -> None:
    created = kbmcp("--db", db, "tenant", "create", "acme", "--json").json()
    assert created["name"] == "acme" and created["tenant_id"].startswith("ten_")
    assert kbmcp("--db", db, "tenant", "create", "beta").out.startswith("created tenant beta")
    names = [t["name"] for t in kbmcp("--db", db, "tenant", "list", "--json").json()]
    assert names == ["acme", "beta", "local"]

    kb = kbmcp("--db", db, "kb", "create", "ops", "--tenant", "acme", "--json").json()
    assert kb["owner"] == "acme" and kb["shared_with"] == []
    source = write(tmp_path / "src", {"failover.md": "# Failover\n\nZanzibar procedure.\n"})
    added = kbmcp("--db", db, "add", source, "--kb", "ops", "--tenant", "acme", "--json")
    assert added.code == 0 and added.json()["knowledge_base_id"] == kb["knowledge_base_id"]

    share = kbmcp("--db", db, "kb", "share", "ops", "--tenant", "beta", "--json").json()
    assert share == {
        "knowledge_base_id": kb["knowledge_base_id"],
        "knowledge_base": "ops",
        "owner": "acme",
        "tenant": "beta",
        "shared": True,
        "changed": True,
    }
    again = kbmcp("--db", db, "kb", "share", kb["knowledge_base_id"], "--tenant", "beta")
    assert "already shared with beta" in again.out
    listed = kbmcp("--db", db, "kb", "list", "--tenant", "beta", "--json").json()
    assert [(k["name"], k["owner"], k["shared_with"]) for k in listed] == [
        ("ops", "acme", ["beta"])
    ]
    # The local owner's own view is unchanged by tenants it does not belong to.
    assert kbmcp("--db", db, "ls", "--json").json() == {"knowledge_bases": []}

    unshared = kbmcp("--db", db, "kb", "unshare", "ops", "--tenant", "beta", "--json").json()
    assert unshared["shared"] is False and unshared["changed"] is True
    assert kbmcp("--db", db, "kb", "list", "--tenant", "beta", "--json").json() == []
    assert "was not shared" in kbmcp("--db", db, "kb", "unshare", "ops", "--tenant", "beta").out


def test_account_errors_are_one_line_and_write_nothing(kbmcp: Kbmcp, db: Path) -> None:
    kbmcp("--db", db, "tenant", "create", "acme")
    kbmcp("--db", db, "tenant", "create", "beta")
    kbmcp("--db", db, "kb", "create", "docs", "--tenant", "acme")
    kbmcp("--db", db, "kb", "create", "docs", "--tenant", "beta")
    assert_one_line_error(kbmcp("--db", db, "tenant", "create", "acme"), "already exists")
    assert_one_line_error(kbmcp("--db", db, "tenant", "create", "a b"), "not valid")
    assert_one_line_error(
        kbmcp("--db", db, "kb", "create", "docs", "--tenant", "acme"), "already has"
    )
    assert_one_line_error(
        kbmcp("--db", db, "kb", "create", "x", "--tenant", "nobody"), "no tenant named 'nobody'"
    )
    assert_one_line_error(
        kbmcp("--db", db, "kb", "share", "docs", "--tenant", "local"),
        "several knowledge bases are named 'docs'",
    )
    acme_docs = kbmcp("--db", db, "kb", "list", "--tenant", "acme", "--json").json()[0]
    assert_one_line_error(
        kbmcp("--db", db, "kb", "share", acme_docs["knowledge_base_id"], "--tenant", "acme"),
        "owns",
    )
    assert_one_line_error(
        kbmcp(
            "--db",
            db,
            "token",
            "create",
            "--tenant",
            "beta",
            "--scope",
            "knowledge:read",
            "--kb",
            acme_docs["knowledge_base_id"],
        ),
        "no knowledge base named or with id",
    )
    assert_one_line_error(
        kbmcp("--db", db, "token", "create", "--tenant", "beta"), "at least one scope"
    )
    assert_one_line_error(
        kbmcp("--db", db, "token", "create", "--scope", "kb:admin"), "'kb:admin' is not one of"
    )
    assert_one_line_error(kbmcp("--db", db, "token", "revoke", "tok_0000000000000000"), "no token")
    assert_one_line_error(kbmcp("--db", db, "token", "revoke", "nonsense"), "not a valid token id")
    assert kbmcp("--db", db, "token", "list", "--json").json() == []
    conn = open_connection(db)
    assert conn.execute("SELECT count(*) FROM share").fetchone()[0] == 0
    conn.close()


def test_token_secret_is_shown_once_and_stored_only_as_a_hash(kbmcp: Kbmcp, db: Path) -> None:
    kbmcp("--db", db, "tenant", "create", "acme")
    kbmcp("--db", db, "kb", "create", "ops", "--tenant", "acme")
    run = kbmcp(
        "--db",
        db,
        "token",
        "create",
        "--tenant",
        "acme",
        "--scope",
        "knowledge:read",
        "--scope",
        "memory:read",
        "--kb",
        "ops",
        "--expires",
        "30",
        "--name",
        "ci",
    )
    assert run.code == 0
    secret = run.out.splitlines()[-1]
    assert secret.startswith("kbmcp_") and "shown once" in run.out
    listed = kbmcp("--db", db, "token", "list", "--json").json()
    assert len(listed) == 1
    token = listed[0]
    assert token["tenant"] == "acme" and token["name"] == "ci" and token["status"] == "active"
    assert token["scopes"] == ["knowledge:read", "memory:read"]
    assert len(token["knowledge_base_ids"]) == 1 and token["expires_at"] is not None
    assert secret not in str(listed)
    conn = open_connection(db)
    stored = conn.execute("SELECT secret_hash FROM token").fetchone()[0]
    assert stored == hashlib.sha256(secret.encode()).hexdigest()
    dump = "\n".join(conn.iterdump()) if hasattr(conn, "iterdump") else ""
    conn.close()
    assert secret not in dump and secret not in db.read_bytes().decode("latin-1")

    revoked = kbmcp("--db", db, "token", "revoke", token["token_id"], "--json").json()
    assert revoked["status"] == "revoked" and revoked["revoked_at"] is not None
    again = kbmcp("--db", db, "token", "revoke", token["token_id"], "--json").json()
    assert again["revoked_at"] == revoked["revoked_at"]
