"""`kbmcp connect` / `disconnect`: write kbmcp into an MCP client's configuration, or take it out.

The clients and their formats: kbmcp/connect/clients.py; how a file is read and written without
losing anything: kbmcp/connect/config_file.py. Only kbmcp's own entry (named `kbmcp`, or
`--name`) is ever added, replaced or removed; every other server and key stays as it was.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbmcp.connect import config_file
from kbmcp.connect.clients import CLIENTS, Client, Launch, Scope, Unsupported, Where
from kbmcp.errors import InvalidRequest

DEFAULT_NAME = "kbmcp"


@dataclass(frozen=True)
class Change:
    client: str
    scope: Scope
    path: Path
    diff: str  # unified diff; empty when nothing changes
    written: bool  # False for --dry-run and for no change
    backup: Path | None  # the copy made before writing

    @property
    def changed(self) -> bool:
        return bool(self.diff)


@dataclass(frozen=True)
class ClientStatus:
    client: str
    title: str
    scope: Scope
    path: Path
    installed: bool
    configured: str | None  # "stdio" / "http" when kbmcp's entry is there; None otherwise
    problem: str | None  # the file cannot be read


def client_named(name: str) -> Client:
    client = CLIENTS.get(name.strip().lower())
    if client is None:
        raise InvalidRequest(
            f"CLIENT: unknown client {name!r}; choose one of {', '.join(CLIENTS)}",
            details={"argument": "client", "value": name},
        )
    return client


def _scoped(client: Client, scope: Scope) -> None:
    if scope not in client.paths:
        raise InvalidRequest(
            f"--scope: {client.title} has no {scope} scope (it has: {', '.join(client.paths)})",
            details={"argument": "scope", "value": scope},
        )


def connect(
    client: Client,
    scope: Scope,
    launch: Launch,
    *,
    name: str = DEFAULT_NAME,
    dry_run: bool = False,
    where: Where | None = None,
) -> Change:
    """Add (or update) kbmcp's entry in the client's file for `scope`."""
    _scoped(client, scope)
    here = where or Where.here()
    try:
        entry = client.entry(launch, name)
    except Unsupported as error:
        raise InvalidRequest(str(error), details={"argument": "http"}) from None
    config = config_file.read(client.path(scope, here), client.format)
    config.servers(client.key, create=False)  # (a key that is not an object: Unreadable)
    config.set((client.key, name), _table(client, entry))
    if client.inputs is not None:
        _put_inputs(config, client.inputs(launch, name))
    return _apply(client, scope, config, dry_run)


def disconnect(
    client: Client,
    scope: Scope,
    *,
    name: str = DEFAULT_NAME,
    dry_run: bool = False,
    where: Where | None = None,
) -> Change:
    """Remove kbmcp's entry (and only it) from the client's file for `scope`."""
    _scoped(client, scope)
    here = where or Where.here()
    path = client.path(scope, here)
    if not path.exists():
        return Change(client.name, scope, path, "", written=False, backup=None)
    config = config_file.read(path, client.format)
    servers = config.servers(client.key, create=False)
    if servers is None or name not in servers:
        return Change(client.name, scope, path, "", written=False, backup=None)
    removed = config.remove((client.key, name))
    if client.inputs is not None:
        _drop_inputs(config, removed)
    return _apply(client, scope, config, dry_run)


def statuses(where: Where | None = None, name: str = DEFAULT_NAME) -> list[ClientStatus]:
    """Every client and scope: installed or not, and whether kbmcp's entry is there."""
    here = where or Where.here()
    found = []
    for client in CLIENTS.values():
        installed = client.installed(here)
        for scope in client.paths:
            path = client.path(scope, here)
            configured = problem = None
            if path.exists():
                try:
                    servers = config_file.read(path, client.format).servers(
                        client.key, create=False
                    )
                except InvalidRequest as error:
                    problem = error.message
                else:
                    entry = None if servers is None else servers.get(name)
                    if isinstance(entry, MutableMapping):
                        configured = "stdio" if "command" in entry else "http"
            elif scope == "project":
                continue  # only the project files that exist are worth a line
            found.append(
                ClientStatus(client.name, client.title, scope, path, installed, configured, problem)
            )
    return found


def _apply(client: Client, scope: Scope, config: config_file.ConfigFile, dry_run: bool) -> Change:
    new_text = config.render()
    changes = config_file.diff(config, new_text)
    if not changes or dry_run:
        return Change(client.name, scope, config.path, changes, written=False, backup=None)
    backup = config_file.write(config, new_text)
    return Change(client.name, scope, config.path, changes, written=True, backup=backup)


def _table(client: Client, entry: dict[str, Any]) -> Any:
    """The entry as the file's format holds it (a TOML table for Codex)."""
    if client.format != "toml":
        return entry
    import tomlkit

    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = value
    # A blank line after the table, as before every other table, when one follows it (at the
    # file's end it is trimmed: config_file.ConfigFile.render).
    table.add(tomlkit.nl())
    return table


def _put_inputs(config: config_file.ConfigFile, inputs: list[dict[str, Any]]) -> None:
    """VS Code's secret prompts for the entry, replacing ones of the same id."""
    if not inputs:
        return
    held = config.data.get("inputs", [])
    if not isinstance(held, list):
        raise InvalidRequest(f"{config.path}: 'inputs' is not a list: fix the file by hand")
    ids = {item["id"] for item in inputs}
    kept = [item for item in held if not (isinstance(item, dict) and item.get("id") in ids)]
    if kept + inputs != held:
        config.set(("inputs",), [*kept, *inputs])


def _drop_inputs(config: config_file.ConfigFile, removed: Any) -> None:
    """The secret prompts the removed entry referred to (`${input:ID}`)."""
    held = config.data.get("inputs")
    if not isinstance(held, list) or not isinstance(removed, dict):
        return
    headers = removed.get("headers") or {}
    used = {
        value.split("${input:", 1)[1].split("}", 1)[0]
        for value in headers.values()
        if isinstance(value, str) and "${input:" in value
    }
    left = [item for item in held if not (isinstance(item, dict) and item.get("id") in used)]
    if not left and held:  # only kbmcp's: the key goes with them, as it came with them
        config.remove(("inputs",))
    elif left != held:
        config.set(("inputs",), left)
