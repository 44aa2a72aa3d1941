"""Every CLI command on a PostgreSQL URL: the commands of `kbmcp.cli.common.POSTGRES_COMMANDS`
run on it (through the real entry point, on a real server), every other one refuses it with
one line naming the command (never a file named `postgresql:`). `kbmcp serve` over HTTP on a URL
is tested with real clients in tests/test_multi_server.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from kbmcp.cli import cli
from kbmcp.cli.common import POSTGRES_COMMANDS
from tests.beir_fixture import write_fixture
from tests.cli_support import Run
from tests.mcp_support import write

# Every command, in an order where each finds what it needs from the ones before it
# ({doc}, {token}, {memory}: ids printed earlier; {dir}: the test's folder). `serve` and
# `watch` run until stopped: they are tested as processes (tests/test_multi_server.py,
# tests/test_watch.py), here only their gate.
INVOCATIONS: dict[str, list[str]] = {
    "tenant create": ["tenant", "create", "acme"],
    "tenant list": ["tenant", "list"],
    "kb create": ["kb", "create", "notes"],
    "kb list": ["kb", "list"],
    "add": ["add", "{dir}/docs", "--kb", "notes"],
    "search": ["search", "wombat", "--json"],
    "read": ["read", "{doc}"],
    "ls": ["ls"],
    "kb share": ["kb", "share", "notes", "--tenant", "acme"],
    "kb unshare": ["kb", "unshare", "notes", "--tenant", "acme"],
    "token create": ["token", "create", "--tenant", "acme", "--scope", "knowledge:read", "--json"],
    "token list": ["token", "list"],
    "token revoke": ["token", "revoke", "{token}"],
    "remember": ["remember", "Deploys freeze on Fridays", "--json"],
    "memory list": ["memory", "list"],
    "memory store create": ["memory", "store", "create", "decisions"],
    "memory store list": ["memory", "store", "list"],
    "forget": ["forget", "{memory}"],
    "reembed": ["reembed"],
    "doctor": ["doctor"],
    "eval": ["eval", "{dir}/beir", "--mode", "lexical"],
    "backup": ["backup", "{dir}/backup.db"],
    "watch": ["watch", "{dir}/docs", "--kb", "notes"],
    "serve": ["serve", "--http", "--host", "example.com"],
}
# Commands that take no --db (their arguments say where the data is).
NO_DATABASE = {"copy"}
# Run until stopped: on a URL, past the gate, serve stops at a check before it listens.
LONG_RUNNING = {"serve", "watch"}


def leaf_commands(group: click.Group, prefix: str = "") -> Iterator[str]:
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from leaf_commands(command, f"{path} ")
        else:
            yield path


def test_every_command_has_a_decision_and_an_invocation() -> None:
    """A new command must say whether it runs on PostgreSQL (and be tried here)."""
    assert set(leaf_commands(cli)) - NO_DATABASE == set(INVOCATIONS)
    assert set(INVOCATIONS) >= POSTGRES_COMMANDS


@pytest.fixture
def ids() -> dict[str, str]:
    # Placeholders for ids a refused command would have printed: a refusal comes first.
    return {"doc": "doc_0000000000000000", "token": "tok_0000000000000000",
            "memory": "mem_0000000000000000"}  # fmt: skip


def test_each_command_runs_on_a_url_or_refuses_it_naming_itself(
    kbmcp: Callable[..., Run], fresh_postgres_url: str, tmp_path: Path, ids: dict[str, str]
) -> None:
    write(tmp_path / "docs", {"wombat.md": "# Wombats\n\nThe wombat digs burrows.\n"})
    write_fixture(tmp_path / "beir")
    ids["dir"] = str(tmp_path)
    for command, template in INVOCATIONS.items():
        args = [part.format(**ids) for part in template]
        result = kbmcp("--db", fresh_postgres_url, *args)
        if command not in POSTGRES_COMMANDS:
            assert result.code == 1, (command, result)
            assert result.err == (
                f"error: --db: PostgreSQL databases are not served by `kbmcp {command}` in "
                "this version yet; `kbmcp copy SRC DST` copies a knowledge base to and from "
                "one\n"
            ), command
            continue
        if command in LONG_RUNNING:
            # Past the gate: serve refuses a public address while no token is usable.
            assert result.code == 2, (command, result)
            assert "refusing to serve example.com without authentication" in result.err, result.err
            continue
        assert result.code == 0, (command, result.err)
        if command == "search":
            ids["doc"] = json.loads(result.out)["results"][0]["document_id"]
        elif command == "read":
            assert "The wombat digs burrows." in result.out
        elif command == "token create":
            ids["token"] = json.loads(result.out)["token"]["token_id"]
        elif command == "remember":
            ids["memory"] = json.loads(result.out)["memory_id"]
    assert not (tmp_path / "backup.db").exists()


def test_kbmcp_db_from_the_environment_is_gated_alike(
    kbmcp: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBMCP_DB", "postgresql://u@127.0.0.1:1/kb")
    refused = sorted(set(INVOCATIONS) - POSTGRES_COMMANDS)
    if not refused:
        pytest.skip("every command runs on PostgreSQL")
    result = kbmcp(*INVOCATIONS[refused[0]])
    assert result.code == 1
    assert result.err.startswith(
        f"error: KBMCP_DB: PostgreSQL databases are not served by `kbmcp {refused[0]}`"
    )
