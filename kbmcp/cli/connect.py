"""`kbmcp connect CLIENT` / `kbmcp disconnect CLIENT`: kbmcp in an MCP client's configuration,
without hand-editing JSON or TOML (kbmcp/connect/)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbmcp.cli.common import echo_json

if TYPE_CHECKING:
    from kbmcp.connect import Change
    from kbmcp.connect.clients import Launch, Scope

CLIENT_NAMES = (
    "claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "codex", "gemini",
)  # fmt: skip
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

SCOPE_OPTION = click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="user: every project of yours; project: this folder's file (clients that have one).",
)
NAME_OPTION = click.option(
    "--name", default="kbmcp", show_default=True, help="The server's name in the client."
)
DRY_RUN_OPTION = click.option(
    "--dry-run", is_flag=True, help="Print the change as a diff; write nothing."
)


@click.command("connect")
@click.argument("client", required=False, type=click.Choice(CLIENT_NAMES))
@SCOPE_OPTION
@click.option(
    "--http",
    "url",
    default=None,
    metavar="URL",
    help="Connect to a running `kbmcp serve --http` at URL (e.g. http://127.0.0.1:8765/mcp) "
    "instead of starting kbmcp over stdio.",
)
@click.option(
    "--token-env",
    default=None,
    metavar="VAR",
    help="With --http: the environment variable holding the bearer token; the file names the "
    "variable, never the token.",
)
@NAME_OPTION
@click.option(
    "--command",
    "command_path",
    default=None,
    metavar="PATH",
    help="The kbmcp program the client starts (default: this installation's, by absolute path).",
)
@DRY_RUN_OPTION
@click.option("--list", "list_clients", is_flag=True, help="Show the clients and their state.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def connect(
    ctx: click.Context,
    client: str | None,
    scope: str,
    url: str | None,
    token_env: str | None,
    name: str,
    command_path: str | None,
    dry_run: bool,
    list_clients: bool,
    as_json: bool,
) -> None:
    """Add kbmcp to an MCP client's configuration (the --db given, by absolute path).

    Clients: claude-desktop, claude-code, cursor, vscode, windsurf, codex, gemini. Each gets its
    own file, key and format; every other server and setting in the file stays as it was. A
    backup of the file is made before it is written, and running it again changes nothing.
    A file kbmcp cannot read back whole (comments, trailing commas) is left untouched.

    \b
    Examples:
      kbmcp --db ~/kb/kbmcp.db connect claude-desktop
      kbmcp connect cursor --scope project --dry-run
      kbmcp connect codex --http http://127.0.0.1:8765/mcp --token-env KBMCP_TOKEN
      kbmcp connect --list
    """
    from kbmcp.connect import client_named
    from kbmcp.connect import connect as connect_client

    if list_clients:
        if client is not None:
            raise click.UsageError("--list takes no CLIENT")
        _print_list(name, as_json)
        return
    if client is None:
        raise click.UsageError("CLIENT is required (or --list): " + ", ".join(CLIENT_NAMES))
    launch, warning = _launch(ctx, url, token_env, command_path)
    chosen = client_named(client)
    change = connect_client(chosen, _scope(scope), launch, name=name, dry_run=dry_run)
    _report(change, dry_run, as_json, added=True)
    if warning is not None:  # (after the change: an error stays the one line it is)
        click.echo(f"warning: {warning}", err=True)


@click.command("disconnect")
@click.argument("client", type=click.Choice(CLIENT_NAMES))
@SCOPE_OPTION
@NAME_OPTION
@DRY_RUN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def disconnect(client: str, scope: str, name: str, dry_run: bool, as_json: bool) -> None:
    """Remove kbmcp's entry (only it) from an MCP client's configuration.

    \b
    Example:
      kbmcp disconnect claude-desktop
    """
    from kbmcp.connect import client_named
    from kbmcp.connect import disconnect as disconnect_client

    change = disconnect_client(client_named(client), _scope(scope), name=name, dry_run=dry_run)
    _report(change, dry_run, as_json, added=False)


def _scope(scope: str) -> Scope:
    return "project" if scope == "project" else "user"  # (click.Choice checked it)


def _launch(
    ctx: click.Context, url: str | None, token_env: str | None, command_path: str | None
) -> tuple[Launch, str | None]:
    """How the client reaches kbmcp, and a warning worth giving (a database not made yet)."""
    from kbmcp.config import load_settings
    from kbmcp.connect.clients import Launch

    if token_env is not None:
        if url is None:
            raise click.UsageError("--token-env applies to --http")
        if not _ENV_NAME.match(token_env):
            raise click.BadParameter(
                f"{token_env!r} is not an environment variable name", param_hint="--token-env"
            )
    if url is not None:
        if command_path is not None:
            raise click.UsageError("--command applies to stdio, not to --http")
        if not re.match(r"^https?://[^\s/]+", url):
            raise click.BadParameter(f"{url!r} is not an http(s) URL", param_hint="--http")
        return Launch(url=url, token_env=token_env), None
    root = ctx.find_root().obj
    settings = load_settings().with_db(root.get("db"))
    warning = None
    if settings.is_postgres:
        db = str(settings.db)
        if _has_password(db):
            raise click.BadParameter(
                "the PostgreSQL URL holds a password, which kbmcp connect never writes into a "
                "client's file: leave it out of the URL and keep it in ~/.pgpass (or "
                "PGPASSFILE)",
                param_hint="--db",
            )
    else:
        path = settings.db_path.expanduser().absolute()
        db = str(path)
        if not path.exists():
            warning = f"{path} does not exist yet: `kbmcp --db {path} add FOLDER` makes it"
    command, prefix = _kbmcp_program(command_path)
    immutable = ["--immutable"] if root.get("immutable") else []
    return Launch(command=command, args=(*prefix, "--db", db, *immutable, "serve")), warning


def _has_password(url: str) -> bool:
    from urllib.parse import urlsplit

    return bool(urlsplit(url).password) or "password=" in url.lower()


def _kbmcp_program(given: str | None) -> tuple[str, tuple[str, ...]]:
    """The absolute path of the program clients start (desktop apps do not see the shell's
    PATH), and the arguments before kbmcp's own ("-m kbmcp" when only Python is found)."""
    if given is not None:
        return str(Path(given).expanduser().absolute()), ()
    script = Path(sys.executable).parent / ("kbmcp.exe" if sys.platform == "win32" else "kbmcp")
    if script.exists():
        return str(script.absolute()), ()
    found = shutil.which("kbmcp")
    if found is not None:
        return str(Path(found).absolute()), ()
    return str(Path(sys.executable).absolute()), ("-m", "kbmcp")


def _report(change: Change, dry_run: bool, as_json: bool, *, added: bool) -> None:
    from kbmcp.connect import client_named

    title = client_named(change.client).title
    if as_json:
        echo_json(
            {
                "client": change.client,
                "scope": change.scope,
                "path": str(change.path),
                "changed": change.changed,
                "written": change.written,
                "backup": None if change.backup is None else str(change.backup),
                "diff": change.diff,
            }
        )
        return
    if dry_run:
        click.echo(change.diff or f"{change.path}: nothing to change", nl=not change.diff)
        return
    if not change.changed:
        state = "already has kbmcp" if added else "has no kbmcp entry"
        click.echo(f"{title} ({change.scope}) {state} in {change.path}: nothing to change")
        return
    backup = f" (backup: {change.backup})" if change.backup else ""
    verb = "added kbmcp to" if added else "removed kbmcp from"
    click.echo(f"{verb} {title} ({change.scope}): {change.path}{backup}")
    click.echo(f"restart {title} to load the change")


def _print_list(name: str, as_json: bool) -> None:
    from kbmcp.connect import statuses

    found = statuses(name=name)
    if as_json:
        echo_json({"clients": found})
        return
    for status in found:
        installed = "installed" if status.installed else "not installed"
        state = (
            f"unreadable ({status.problem})"
            if status.problem
            else f"kbmcp configured ({status.configured})"
            if status.configured
            else "kbmcp not configured"
        )
        click.echo(f"{status.client:<15} {status.scope:<8} {installed:<14} {state}  {status.path}")
