"""The MCP clients `kbmcp connect` knows: where each keeps its servers, under which key, and the
entry it expects for a stdio server and for a streamable HTTP one.

Checked against each client's documentation (December 2026):
- Claude Desktop: `claude_desktop_config.json` in the app's folder (macOS `~/Library/Application
  Support/Claude`, Windows `%APPDATA%\\Claude`, Linux `$XDG_CONFIG_HOME/Claude`), `mcpServers`,
  stdio entries only (remote servers are added in the app's settings, not in this file).
- Claude Code: user scope `~/.claude.json`, project scope `.mcp.json`; `mcpServers`; entries
  carry `type` (`stdio` / `http`); `${VAR}` is expanded in headers.
- Cursor: `~/.cursor/mcp.json` and `.cursor/mcp.json`; `mcpServers`; a remote server is `url`
  with `headers`; `${env:VAR}` is expanded.
- VS Code: `mcp.json` in the user profile folder (`Code/User`) and `.vscode/mcp.json`;
  `servers` with `type`; a secret is an `inputs` entry (`promptString`, `password`) that VS
  Code asks for once and keeps in its secret storage, referenced as `${input:ID}`.
- Windsurf: `~/.codeium/windsurf/mcp_config.json`; `mcpServers`; a remote server is
  `serverUrl`; `${env:VAR}` is expanded.
- Codex CLI: `$CODEX_HOME/config.toml` (`~/.codex`) and `.codex/config.toml` (trusted
  projects); TOML tables `[mcp_servers.NAME]`; a remote server is `url` with
  `bearer_token_env_var` naming the variable that holds the token.
- Gemini CLI: `~/.gemini/settings.json` and `.gemini/settings.json`; `mcpServers`; streamable
  HTTP is `httpUrl` (`url` is SSE); strings expand `$VAR`.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Format = Literal["json", "toml"]
Scope = Literal["user", "project"]


@dataclass(frozen=True)
class Launch:
    """How the client reaches kbmcp: the command it starts (stdio), or the URL it connects to
    (HTTP) with the environment variable that holds the bearer token (None: no token)."""

    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    token_env: str | None = None

    @property
    def is_http(self) -> bool:
        return self.url is not None


@dataclass(frozen=True)
class Where:
    """What the file locations depend on (the real machine, or a test's)."""

    home: Path
    cwd: Path
    system: str  # sys.platform: darwin, win32, linux
    env: Mapping[str, str]

    @classmethod
    def here(cls) -> Where:
        return cls(Path.home(), Path.cwd(), sys.platform, os.environ)

    def config_dir(self) -> Path:
        """The per-user application settings folder of the platform."""
        if self.system == "darwin":
            return self.home / "Library" / "Application Support"
        if self.system == "win32":
            return Path(self.env.get("APPDATA") or self.home / "AppData" / "Roaming")
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")


@dataclass(frozen=True)
class Client:
    name: str  # as typed: claude-desktop
    title: str  # as shown: Claude Desktop
    format: Format
    key: str  # the object (table) that holds the servers
    paths: Mapping[Scope, Callable[[Where], Path]]
    # Where the client keeps its own files: present means installed.
    home: Callable[[Where], Path]
    program: str | None  # its command-line program, if it has one
    entry: Callable[[Launch, str], dict[str, Any]]  # (how, the server's name)
    # A secret VS Code keeps for the entry (its `inputs`), None for the other clients.
    inputs: Callable[[Launch, str], list[dict[str, Any]]] | None = None

    def path(self, scope: Scope, where: Where) -> Path:
        return self.paths[scope](where)

    def installed(self, where: Where) -> bool:
        if self.home(where).exists():
            return True
        return self.program is not None and shutil.which(self.program) is not None


class Unsupported(ValueError):
    """The client cannot take this kind of entry (a clear message says what to do instead)."""


def _stdio(launch: Launch, *, typed: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if typed else {}
    entry["command"] = launch.command
    entry["args"] = list(launch.args)
    return entry


def _headers(launch: Launch, reference: str) -> dict[str, Any]:
    """An Authorization header whose token the client reads from the variable (`reference`
    formats its name), or none without a token."""
    if launch.token_env is None:
        return {}
    return {"headers": {"Authorization": "Bearer " + reference.format(launch.token_env)}}


def _claude_desktop(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        raise Unsupported(
            "Claude Desktop starts the servers of its configuration file over stdio; it "
            "reaches remote servers as connectors added in its settings, not through this "
            "file. Connect it over stdio instead (for a PostgreSQL database: `kbmcp --db "
            "postgresql://... connect claude-desktop`), or add the URL under Settings > "
            "Connectors"
        )
    return _stdio(launch)


def _claude_code(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        return {"type": "http", "url": launch.url, **_headers(launch, "${{{}}}")}
    return _stdio(launch, typed=True)


def _cursor(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        return {"url": launch.url, **_headers(launch, "${{env:{}}}")}
    return _stdio(launch)


def _vscode(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        entry: dict[str, Any] = {"type": "http", "url": launch.url}
        if launch.token_env is not None:
            entry["headers"] = {"Authorization": "Bearer ${input:" + vscode_input_id(name) + "}"}
        return entry
    return _stdio(launch, typed=True)


def vscode_input_id(server: str) -> str:
    return f"{server}-token"


def _vscode_inputs(launch: Launch, server: str) -> list[dict[str, Any]]:
    if not launch.is_http or launch.token_env is None:
        return []
    return [
        {
            "type": "promptString",
            "id": vscode_input_id(server),
            "description": f"Bearer token of the {server} MCP server (the value of "
            f"${launch.token_env}; kept in VS Code's secret storage)",
            "password": True,
        }
    ]


def _windsurf(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        return {"serverUrl": launch.url, **_headers(launch, "${{env:{}}}")}
    return _stdio(launch)


def _codex(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        entry: dict[str, Any] = {"url": launch.url}
        if launch.token_env is not None:
            entry["bearer_token_env_var"] = launch.token_env
        return entry
    return _stdio(launch)


def _gemini(launch: Launch, name: str) -> dict[str, Any]:
    if launch.is_http:
        return {"httpUrl": launch.url, **_headers(launch, "${{{}}}")}
    return _stdio(launch)


def _codex_home(where: Where) -> Path:
    return Path(where.env.get("CODEX_HOME") or where.home / ".codex")


CLIENTS: dict[str, Client] = {
    client.name: client
    for client in (
        Client(
            "claude-desktop",
            "Claude Desktop",
            "json",
            "mcpServers",
            {"user": lambda w: w.config_dir() / "Claude" / "claude_desktop_config.json"},
            home=lambda w: w.config_dir() / "Claude",
            program=None,
            entry=_claude_desktop,
        ),
        Client(
            "claude-code",
            "Claude Code",
            "json",
            "mcpServers",
            {"user": lambda w: w.home / ".claude.json", "project": lambda w: w.cwd / ".mcp.json"},
            home=lambda w: w.home / ".claude.json",
            program="claude",
            entry=_claude_code,
        ),
        Client(
            "cursor",
            "Cursor",
            "json",
            "mcpServers",
            {
                "user": lambda w: w.home / ".cursor" / "mcp.json",
                "project": lambda w: w.cwd / ".cursor" / "mcp.json",
            },
            home=lambda w: w.home / ".cursor",
            program="cursor",
            entry=_cursor,
        ),
        Client(
            "vscode",
            "VS Code",
            "json",
            "servers",
            {
                "user": lambda w: w.config_dir() / "Code" / "User" / "mcp.json",
                "project": lambda w: w.cwd / ".vscode" / "mcp.json",
            },
            home=lambda w: w.config_dir() / "Code",
            program="code",
            entry=_vscode,
            inputs=_vscode_inputs,
        ),
        Client(
            "windsurf",
            "Windsurf",
            "json",
            "mcpServers",
            {"user": lambda w: w.home / ".codeium" / "windsurf" / "mcp_config.json"},
            home=lambda w: w.home / ".codeium" / "windsurf",
            program="windsurf",
            entry=_windsurf,
        ),
        Client(
            "codex",
            "Codex CLI",
            "toml",
            "mcp_servers",
            {
                "user": lambda w: _codex_home(w) / "config.toml",
                "project": lambda w: w.cwd / ".codex" / "config.toml",
            },
            home=_codex_home,
            program="codex",
            entry=_codex,
        ),
        Client(
            "gemini",
            "Gemini CLI",
            "json",
            "mcpServers",
            {
                "user": lambda w: w.home / ".gemini" / "settings.json",
                "project": lambda w: w.cwd / ".gemini" / "settings.json",
            },
            home=lambda w: w.home / ".gemini",
            program="gemini",
            entry=_gemini,
        ),
    )
}
