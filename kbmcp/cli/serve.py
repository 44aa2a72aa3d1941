"""`kbmcp serve`: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import logging

import click

from kbmcp.cli.common import open_workspace
from kbmcp.errors import KbError
from kbmcp.workspace import Workspace

logger = logging.getLogger("kbmcp.serve")


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
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    help="Logs always go to stderr.",
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
    log_level: str,
    create: bool,
) -> None:
    """Serve the knowledge base to agents over MCP.

    \b
    stdio (desktop agents launch this as a subprocess):  kbmcp serve
    HTTP (one server, many clients):  kbmcp serve --http --port 8765
    A read-only file (read-only mount, no write permission) is served read-only.
    """
    if not use_http and (host is not None or port is not None):
        raise click.UsageError("--host and --port apply to --http")
    # Imported here: the MCP SDK takes ~0.4 s to import, which every other command would pay.
    from kbmcp.server.app import build_server, server_options_from_env
    from kbmcp.server.transports import configure_logging, run_http, run_stdio

    configure_logging(log_level)
    options = server_options_from_env()
    with open_workspace(ctx, create=create, long_lived=True) as workspace:
        server = build_server(workspace, options)
        warm_up = lambda: _warm_up(workspace)  # noqa: E731
        if use_http:
            run_http(
                server,
                host=host or "127.0.0.1",
                port=8765 if port is None else port,
                warm_up=warm_up,
                log_level=log_level,
            )
        else:
            run_stdio(server, warm_up=warm_up)


def _warm_up(workspace: Workspace) -> None:
    """Load the embedding model and check it against the file before the first query, so the
    first search is as fast as the rest. A mismatch is logged, not fatal: reading and listing
    still work, and searches report the error with the command that fixes it."""
    try:
        workspace.ensure_model()
        workspace.embedder.embed(["warm up"])
    except KbError as error:
        logger.warning("%s", error.message)
