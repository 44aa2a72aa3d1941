"""`kbmcp serve`: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbmcp.cli.common import UTF8_TEXT, Utf8Path, open_workspace
from kbmcp.errors import KbError

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from kbmcp.server.auth import PrincipalSource, StoreTokenVerifier
    from kbmcp.server.tools import ServerOptions
    from kbmcp.service.ingest import IngestReport
    from kbmcp.workspace import Workspace

TOKEN_ENV = "KBMCP_TOKEN"

logger = logging.getLogger("kbmcp.serve")
watch_logger = logging.getLogger("kbmcp.watch")


@click.command()
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP at /mcp.")
@click.option("--host", default=None, help="HTTP: interface to bind [default: 127.0.0.1].")
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help="HTTP: port (0 picks a free one) [default: 8765].",
)
@click.option(
    "--no-ui",
    is_flag=True,
    help="HTTP: serve /mcp only, without the web page at / (see docs/web.md).",
)
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    help="Logs always go to stderr.",
)
@click.option(
    "--watch",
    "watch_folders",
    multiple=True,
    type=Utf8Path(path_type=Path),
    metavar="FOLDER",
    help="Keep FOLDER indexed while serving, as `kbmcp watch` does (repeatable).",
)
@click.option(
    "--watch-kb",
    default="default",
    show_default=True,
    type=UTF8_TEXT,
    help="The knowledge base the --watch folders go into.",
)
@click.option(
    "--create",
    is_flag=True,
    help="Create an empty knowledge base if the file does not exist (default: refuse, so a "
    "mistyped --db is an error instead of a new empty file).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    use_http: bool,
    host: str | None,
    port: int | None,
    no_ui: bool,
    log_level: str,
    watch_folders: tuple[Path, ...],
    watch_kb: str,
    create: bool,
) -> None:
    """Serve the knowledge base to agents over MCP.

    \b
    Examples:
      kbmcp serve                          # stdio: desktop agents launch it themselves
      kbmcp serve --http --port 8765       # HTTP: one server, many clients
      kbmcp serve --watch ./docs --watch-kb handbook   # keep a folder indexed meanwhile

    HTTP requires 'Authorization: Bearer <token>' as soon as the file has a usable token
    (`kbmcp token create`); without tokens it serves loopback addresses only. stdio runs as
    the local owner, or as the token in $KBMCP_TOKEN. GET /health answers without a token.
    HTTP also serves a web page at / (same port, same tokens) to look through what agents
    see: knowledge bases, search, a reader, memories; --no-ui leaves it out.
    A read-only file (read-only mount, no write permission) is served read-only.
    """
    if not use_http and (host is not None or port is not None or no_ui):
        raise click.UsageError("--host, --port and --no-ui apply to --http")
    # Imported here: the MCP SDK takes ~0.4 s to import, which every other command would pay.
    from kbmcp.leases import idle_seconds_from_env
    from kbmcp.server.app import build_server, server_options_from_env
    from kbmcp.server.transports import configure_logging, run_http, run_stdio

    configure_logging(log_level)
    options = server_options_from_env()
    idle_seconds = idle_seconds_from_env()
    with (
        open_workspace(ctx, create=create, long_lived=True) as workspace,
        watching(workspace, list(watch_folders), watch_kb),
    ):
        warm_up = lambda: _warm_up(workspace, idle_seconds)  # noqa: E731
        if use_http:
            if os.environ.get(TOKEN_ENV):
                logger.warning("%s applies to stdio; HTTP clients send their own tokens", TOKEN_ENV)
            bind = host or "127.0.0.1"
            verifier = http_verifier(workspace, bind)
            run_http(
                build_server(workspace, options, token_verifier=verifier),
                host=bind,
                port=8765 if port is None else port,
                verifier=verifier,
                warm_up=warm_up,
                log_level=log_level,
                web=None if no_ui else web_page(workspace, verifier, options),
            )
        else:
            server = build_server(workspace, options, principals=_stdio_principals(workspace))
            run_stdio(server, warm_up=warm_up)


def web_page(
    workspace: Workspace, verifier: StoreTokenVerifier | None, options: ServerOptions
) -> Callable[[ASGIApp], ASGIApp]:
    """The web page (kbmcp/web/) beside the MCP app, with the same token check and options."""
    from kbmcp.web.app import web_app, with_web_ui

    page = web_app(workspace, verifier=verifier, options=options)
    return lambda mcp_app: with_web_ui(mcp_app, page)


def http_verifier(workspace: Workspace, host: str) -> StoreTokenVerifier | None:
    """Authentication is on as soon as the file has a usable token. Without one, the server runs
    as the local owner, and only where nobody else can reach it (loopback)."""
    from kbmcp.server.auth import StoreTokenVerifier, is_loopback
    from kbmcp.service.tokens import count_usable_tokens

    if count_usable_tokens(workspace, workspace.local_principal()) > 0:
        return StoreTokenVerifier(workspace)
    if not is_loopback(host):
        raise click.UsageError(
            f"refusing to serve {host} without authentication: this file has no usable token. "
            "Create one with `kbmcp token create --scope knowledge:read` (clients send it as "
            "'Authorization: Bearer <secret>'), or bind a loopback address such as 127.0.0.1"
        )
    logger.warning(
        "no tokens: serving HTTP WITHOUT authentication as the local owner on %s (anyone on "
        "this machine can read every document); `kbmcp token create` turns authentication on "
        "at the next start",
        host,
    )
    return None


def _stdio_principals(workspace: Workspace) -> PrincipalSource:
    """stdio runs as the local owner, or as KBMCP_TOKEN's principal when it is set."""
    from kbmcp.access import principal_for_secret
    from kbmcp.server.auth import LocalOwner, TokenPrincipals

    secret = os.environ.get(TOKEN_ENV, "").strip()
    if not secret:
        return LocalOwner(workspace)
    with workspace.lock:
        usable = principal_for_secret(workspace.store, workspace.conn, secret) is not None
    if not usable:
        raise click.UsageError(
            f"{TOKEN_ENV} is not a usable token (unknown, expired or revoked); see `kbmcp token "
            "list`, or unset it to serve as the local owner"
        )
    return TokenPrincipals(workspace, secret)


@contextlib.contextmanager
def watching(workspace: Workspace, folders: list[Path], kb_name: str) -> Iterator[None]:
    """Run `watch_paths` on `folders` in a background thread while the server runs. It shares
    the server's workspace: it holds the workspace lock only while writing, never while
    embedding, so searches are answered while it indexes. Syncs are logged on stderr."""
    if not folders:
        yield
        return
    from kbmcp.service.ingest import IngestOptions
    from kbmcp.service.watch import changed, error_line, watch_paths, watched_folders

    stop = threading.Event()
    # watchfiles logs every change it sees at INFO; the sync's own line says what matters.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)

    def log_report(report: IngestReport) -> None:
        if changed(report):
            watch_logger.info("%s", report.summary_line())

    def log_error(error: Exception) -> None:
        watch_logger.warning("%s", error_line(error))

    principal = workspace.local_principal()
    options = IngestOptions(knowledge_base=kb_name)
    folders = watched_folders(folders)  # a missing folder is an error before serving starts
    thread = threading.Thread(
        target=watch_paths,
        args=(workspace, principal, folders, options),
        kwargs={"on_report": log_report, "on_error": log_error, "stop": stop},
        name="kbmcp-watch",
        daemon=True,
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _warm_up(workspace: Workspace, idle_seconds: float) -> None:
    """Load the embedding model and check it against the file before the first query, so the
    first search is as fast as the rest. A mismatch is logged, not fatal: reading and listing
    still work, and searches report the error with the command that fixes it. Then the
    connections the server holds between requests are closed when idle (PostgreSQL)."""
    try:
        workspace.ensure_model()
        workspace.embedder.embed(["warm up"])
    except KbError as error:
        logger.warning("%s", error.message)
    workspace.close_idle_connections(idle_seconds)
