"""Every CLI command takes a PostgreSQL URL for --db / KBMCP_DB (issue 18): each is run through
the real entry point on a real server and does its job there. `kbmcp serve --http` on a URL is
tested with real clients in tests/test_multi_server.py, `kbmcp watch` as a process here."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from kbmcp.cli import cli
from tests import processes
from tests.beir_fixture import write_fixture
from tests.cli_support import Run, assert_one_line_error
from tests.mcp_support import REPO_ROOT, subprocess_env, write
from tests.patience import ceiling
from tests.server_process import default_sigint

# Every command, in an order where each finds what it needs from the ones before it
# ({doc}, {token}, {memory}: ids printed earlier; {dir}: the test's folder).
INVOCATIONS: dict[str, list[str]] = {
    "tenant create": ["tenant", "create", "acme"],
    "tenant list": ["tenant", "list"],
    "kb create": ["kb", "create", "notes"],
    "kb list": ["kb", "list"],
    "add": ["add", "{dir}/docs", "--kb", "notes"],
    "search": ["search", "wombat", "--json"],
    "read": ["read", "{doc}"],
    "ls": ["ls", "--all"],
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
    "export": ["export", "-o", "{dir}/kb.jsonl"],
    "import": ["import", "{dir}/other.jsonl"],
    "audit": ["audit", "--json"],
    "serve": ["serve", "--http", "--host", "example.com"],
    "watch": ["watch", "{dir}/docs", "--kb", "notes"],
}
# Commands that take no --db (their arguments say where the data is), or only to write its
# path into an MCP client's configuration (connect, disconnect: tests/test_connect.py).
NO_DATABASE = {"copy", "connect", "disconnect"}
# A small export of another database, for `import` (docs/export-format.md).
OTHER_EXPORT = "".join(
    json.dumps(line) + "\n"
    for line in (
        {"type": "kbmcp_export", "format": 1, "with_vectors": False, "with_tenants": False},
        {"type": "knowledge_base", "id": "kb_00000000000000aa", "tenant": "local",
         "name": "imported", "description": "", "tags": {},
         "created_at": "2026-01-01T00:00:00.000000Z",
         "updated_at": "2026-01-01T00:00:00.000000Z"},
        {"type": "end", "counts": {"knowledge_base": 1}},
    )
)  # fmt: skip
# Run until stopped: tried as a process (watch), or up to the check before serving (serve).
LONG_RUNNING = {"serve", "watch"}


def leaf_commands(group: click.Group, prefix: str = "") -> Iterator[str]:
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from leaf_commands(command, f"{path} ")
        else:
            yield path


def test_every_command_is_tried_on_a_url() -> None:
    """A new command must be added here (and so run on PostgreSQL)."""
    assert set(leaf_commands(cli)) - NO_DATABASE == set(INVOCATIONS)


def test_each_command_runs_on_a_url(
    kbmcp: Callable[..., Run], fresh_postgres_url: str, tmp_path: Path
) -> None:
    write(tmp_path / "docs", {"wombat.md": "# Wombats\n\nThe wombat digs burrows.\n"})
    write_fixture(tmp_path / "beir")
    (tmp_path / "other.jsonl").write_text(OTHER_EXPORT, encoding="utf-8")
    ids = {"dir": str(tmp_path)}
    outputs: dict[str, Run] = {}
    for command, template in INVOCATIONS.items():
        if command == "watch":
            continue
        args = [part.format(**ids) for part in template]
        result = outputs[command] = kbmcp("--db", fresh_postgres_url, *args)
        if command == "backup":
            # A server's database is backed up with its own tools: one line saying which.
            assert_one_line_error(result, "is a PostgreSQL database", "pg_dump", "kbmcp copy")
            continue
        if command == "serve":
            # Past opening the database, serve refuses a public address while no token is usable.
            assert result.code == 2, result
            assert "refusing to serve example.com without authentication" in result.err
            continue
        assert result.code == 0, (command, result.err)
        if command == "search":
            ids["doc"] = json.loads(result.out)["results"][0]["document_id"]
        elif command == "token create":
            ids["token"] = json.loads(result.out)["token"]["token_id"]
        elif command == "remember":
            ids["memory"] = json.loads(result.out)["memory_id"]
    assert "The wombat digs burrows." in outputs["read"].out
    assert "wombat.md" in outputs["ls"].out
    assert "acme" in outputs["tenant list"].out
    assert "Deploys freeze on Fridays" in outputs["memory list"].out
    assert "forgot" in outputs["forget"].out.lower()
    assert "PostgreSQL" in outputs["doctor"].out
    assert not (tmp_path / "backup.db").exists()
    assert '"name":"notes"' in (tmp_path / "kb.jsonl").read_text(encoding="utf-8")
    assert "imported 1 knowledge base" in outputs["import"].out
    actions = [event["action"] for event in json.loads(outputs["audit"].out)["events"]]
    assert {"add", "remember", "forget", "import", "token revoke"} <= set(actions)
    assert not list(Path.cwd().glob("postgresql*"))  # a URL is never taken for a file name


def test_watch_runs_on_a_url_until_interrupted(fresh_postgres_url: str, tmp_path: Path) -> None:
    folder = write(tmp_path / "docs", {"heron.md": "# Herons\n\nThe heron waits.\n"})
    process = processes.popen(
        [sys.executable, "-m", "kbmcp", "--db", fresh_postgres_url, "watch", str(folder),
         "--kb", "notes"],
        env=subprocess_env(fresh_postgres_url), cwd=REPO_ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        stderr = processes.Lines(process.stderr)
        stderr.until(lambda line: "Ctrl-C to stop" in line)  # the event: it is watching
        assert "watching" in "".join(stderr.seen), "".join(stderr.seen)
        process.send_signal(signal.SIGINT)
        err = stderr.rest()
        process.wait(timeout=ceiling(10))
    finally:
        processes.stop(process)
    assert process.returncode == 0, err
    assert "stopped watching" in err
    import psycopg

    with psycopg.connect(fresh_postgres_url) as conn:
        paths = conn.execute("SELECT path FROM document").fetchall()
    assert paths == [("heron.md",)]  # the first sync wrote there


def test_kbmcp_db_from_the_environment_takes_a_url_too(
    kbmcp: Callable[..., Run], fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBMCP_DB", fresh_postgres_url)
    assert kbmcp("tenant", "create", "acme").code == 0
    listed = kbmcp("tenant", "list", "--json")
    assert listed.code == 0 and "acme" in listed.out
