"""`kbmcp connect` / `disconnect` (kbmcp/connect/): golden before/after files per client (in
tests/connect_golden/CLIENT/: before, after for stdio, after-http for --http with a token
variable), idempotence, backups, --dry-run, --list, files it cannot parse, and the paths of each
platform. KBMCP_UPDATE_GOLDEN=1 rewrites the after files (review the diff like code)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kbmcp.connect.clients import CLIENTS, Where
from tests.cli_support import Run

GOLDEN = Path(__file__).parent / "connect_golden"
DB = "/home/me/kb/kbmcp.db"
COMMAND = "/opt/kbmcp/bin/kbmcp"
URL = "http://127.0.0.1:8765/mcp"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of the test's own (and a project folder as the current directory)."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "APPDATA", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(project)
    return home


def _where(home: Path) -> Where:
    return Where(home, Path.cwd(), "linux", os.environ)


def _golden(client: str, name: str) -> Path:
    suffix = ".toml" if CLIENTS[client].format == "toml" else ".json"
    return GOLDEN / client / f"{name}{suffix}"


def _matches(path: Path, golden: Path) -> None:
    if os.environ.get("KBMCP_UPDATE_GOLDEN"):
        golden.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert path.read_text(encoding="utf-8") == golden.read_text(encoding="utf-8"), golden


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.*.kbmcp.bak"))


@pytest.mark.parametrize("client", list(CLIENTS))
def test_golden_before_and_after(client: str, kbmcp: Callable[..., Run], home: Path) -> None:
    target = CLIENTS[client].path("user", _where(home))
    before = _golden(client, "before").read_text(encoding="utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(before, encoding="utf-8")

    added = kbmcp("--db", DB, "connect", client, "--command", COMMAND)
    assert added.code == 0, added.err
    assert f"added kbmcp to {CLIENTS[client].title} (user): {target}" in added.out
    _matches(target, _golden(client, "after"))
    (backup,) = _backups(target)
    assert backup.read_text(encoding="utf-8") == before

    again = kbmcp("--db", DB, "connect", client, "--command", COMMAND)
    assert again.code == 0 and "nothing to change" in again.out
    assert _backups(target) == [backup]  # no write, no backup
    _matches(target, _golden(client, "after"))

    listed = kbmcp("connect", "--list", "--json").json()["clients"]  # type: ignore[index]
    mine = next(s for s in listed if s["client"] == client and s["scope"] == "user")
    assert (mine["installed"], mine["configured"]) == (True, "stdio")

    http = ["--http", URL, "--token-env", "KBMCP_TOKEN"]
    if client == "claude-desktop":
        refused = kbmcp("connect", client, *http)
        assert refused.code == 1 and "Settings > Connectors" in refused.err
        _matches(target, _golden(client, "after"))
    else:
        dry = kbmcp("connect", client, *http, "--dry-run")
        assert dry.code == 0 and dry.out.startswith(f"--- {target}\n+++ {target}\n")
        assert "KBMCP_TOKEN" in dry.out
        _matches(target, _golden(client, "after"))  # a dry run writes nothing
        switched = kbmcp("connect", client, *http)
        assert switched.code == 0, switched.err
        _matches(target, _golden(client, "after-http"))
        assert len(_backups(target)) == 2

    removed = kbmcp("disconnect", client)
    assert removed.code == 0 and "removed kbmcp from" in removed.out
    assert target.read_text(encoding="utf-8") == before  # every other byte as it was
    gone = kbmcp("disconnect", client)
    assert gone.code == 0 and "has no kbmcp entry" in gone.out


@pytest.mark.parametrize("client", [c for c in CLIENTS if "project" in CLIENTS[c].paths])
def test_project_scope_writes_the_folder_s_file(
    client: str, kbmcp: Callable[..., Run], home: Path
) -> None:
    run = kbmcp("--db", DB, "connect", client, "--scope", "project", "--command", COMMAND)
    assert run.code == 0, run.err
    target = CLIENTS[client].path("project", _where(home))
    assert target.is_relative_to(Path.cwd()) and target.exists()
    assert not CLIENTS[client].path("user", _where(home)).exists()
    assert COMMAND in target.read_text(encoding="utf-8")
    assert _backups(target) == []  # a new file: nothing to back up


def test_a_client_without_a_project_scope_says_so(kbmcp: Callable[..., Run], home: Path) -> None:
    run = kbmcp("connect", "windsurf", "--scope", "project")
    assert run.code == 1 and "Windsurf has no project scope" in run.err


@pytest.mark.parametrize(
    ("client", "text", "problem"),
    [
        ("vscode", '{\n  // my servers\n  "servers": {}\n}\n', "line 2, column 3"),
        ("cursor", '{"mcpServers": {"a": {"command": "x"},}}\n', "trailing commas"),
        ("claude-desktop", '{"mcpServers": {}}\n{"more": 1}\n', "Extra data at line 2"),
        ("gemini", "[1, 2]\n", "top level is not a JSON object"),
        ("claude-code", '{"mcpServers": ["x"]}\n', "'mcpServers' is not an object"),
        ("codex", '[mcp_servers.a]\ncommand = "x"\ncommand = "y"\n', "not valid TOML"),
    ],
)
def test_a_file_it_cannot_read_back_is_left_untouched(
    client: str, text: str, problem: str, kbmcp: Callable[..., Run], home: Path
) -> None:
    target = CLIENTS[client].path("user", _where(home))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    for command in (["connect", client, "--command", COMMAND], ["disconnect", client]):
        if command[0] == "disconnect" and "not an object" in problem:
            continue  # nothing of kbmcp's to remove from it
        run = kbmcp("--db", DB, *command)
        assert run.code == 1 and problem in run.err, run.err
        assert run.err.count("\n") == 1 and "Traceback" not in run.err
        assert target.read_text(encoding="utf-8") == text
        assert _backups(target) == []


def test_no_secret_is_ever_written(kbmcp: Callable[..., Run], home: Path) -> None:
    refused = kbmcp("--db", "postgresql://kb:s3cret@db.internal/kb", "connect", "cursor")
    assert refused.code == 2 and "~/.pgpass" in refused.err
    assert not CLIENTS["cursor"].path("user", _where(home)).exists()
    ok = kbmcp("--db", "postgresql://kb@db.internal/kb", "connect", "cursor", "--command", COMMAND)
    assert ok.code == 0, ok.err
    for client in CLIENTS:
        if client == "claude-desktop":
            continue
        run = kbmcp("connect", client, "--http", URL, "--token-env", "TEAM_KB_TOKEN")
        assert run.code == 0, run.err
        text = CLIENTS[client].path("user", _where(home)).read_text(encoding="utf-8")
        assert "TEAM_KB_TOKEN" in text or client == "vscode", client
        assert "kbmcp_" not in text  # the shape of a secret
    bad = kbmcp("connect", "cursor", "--http", URL, "--token-env", "not a name")
    assert bad.code == 2 and "--token-env" in bad.err


def test_the_list_shows_every_client(kbmcp: Callable[..., Run], home: Path) -> None:
    (home / ".codex").mkdir()
    run = kbmcp("connect", "--list")
    assert run.code == 0, run.err
    lines = {line.split()[0]: line for line in run.out.splitlines()}
    assert set(lines) == set(CLIENTS)
    assert "installed" in lines["codex"] and "not installed" not in lines["codex"]
    assert "kbmcp not configured" in lines["codex"]


def test_the_default_command_is_this_installation_by_absolute_path(
    kbmcp: Callable[..., Run], home: Path
) -> None:
    assert kbmcp("--db", "rel/kb.db", "connect", "gemini").code == 0
    entry = json.loads(CLIENTS["gemini"].path("user", _where(home)).read_text())["mcpServers"][
        "kbmcp"
    ]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    db = entry["args"][entry["args"].index("--db") + 1]
    assert db == str(Path.cwd() / "rel" / "kb.db")


@pytest.mark.parametrize(
    ("system", "env", "desktop", "vscode"),
    [
        (
            "darwin",
            {},
            "Library/Application Support/Claude/claude_desktop_config.json",
            "Library/Application Support/Code/User/mcp.json",
        ),
        (
            "win32",
            {"APPDATA": "/users/me/AppData/Roaming"},
            "/users/me/AppData/Roaming/Claude/claude_desktop_config.json",
            "/users/me/AppData/Roaming/Code/User/mcp.json",
        ),
        ("linux", {}, ".config/Claude/claude_desktop_config.json", ".config/Code/User/mcp.json"),
        (
            "linux",
            {"XDG_CONFIG_HOME": "/xdg"},
            "/xdg/Claude/claude_desktop_config.json",
            "/xdg/Code/User/mcp.json",
        ),
    ],
)
def test_each_platform_s_paths(system: str, env: dict[str, str], desktop: str, vscode: str) -> None:
    home = Path("/home/me")
    where = Where(home, Path("/work"), system, env)
    assert CLIENTS["claude-desktop"].path("user", where) == home / desktop
    assert CLIENTS["vscode"].path("user", where) == home / vscode
    assert CLIENTS["windsurf"].path("user", where) == home / ".codeium/windsurf/mcp_config.json"
    assert CLIENTS["codex"].path("project", where) == Path("/work/.codex/config.toml")
    codex_home = Where(home, Path("/work"), system, {**env, "CODEX_HOME": "/opt/codex"})
    assert CLIENTS["codex"].path("user", codex_home) == Path("/opt/codex/config.toml")
