"""Running the server: stdio for desktop agents, streamable HTTP (uvicorn) at /mcp.

stdio: stdout carries protocol messages only. Logs go to stderr, and while the embedding model
loads (before the SDK takes over stdout) file descriptor 1 points at stderr too, so nothing a
library prints can corrupt the stream. HTTP: one line "listening on http://HOST:PORT/mcp" on
stderr once the socket accepts connections (with --port 0 it names the port the OS chose).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterator

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp

from kbmcp.errors import KbError
from kbmcp.server.auth import StoreTokenVerifier
from kbmcp.server.host_check import binds_loopback_only, listen_address
from kbmcp.server.http_app import MCP_PATH, http_app
from kbmcp.server.http_body import BodyDeadline
from kbmcp.server.http_sessions import session_limits_from_env
from kbmcp.server.stdio import serve_stdio
from kbmcp.server.stdio_lines import max_line_bytes_from_env

LOG_FORMAT = "%(asctime)s kbmcp %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(__name__)


def configure_logging(level: str = "WARNING") -> None:
    """Log to stderr. Call before building the server: the SDK only adds its own handler when
    the root logger has none."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the duration (C libraries included)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run_stdio(server: MCPServer, warm_up: Callable[[], None] | None = None) -> None:
    max_line_bytes = max_line_bytes_from_env()  # a bad setting is an error before anything starts
    if warm_up is not None:
        with stdout_to_stderr():
            warm_up()
    # The SDK diverts fd 1 to stderr while it serves and writes protocol messages to a private
    # duplicate of the original stdout.
    anyio.run(serve_stdio, server, max_line_bytes)


class _AnnouncingServer(uvicorn.Server):
    """uvicorn, announcing the bound address on stderr once it accepts connections, and
    returning after a SIGTERM or SIGINT instead of dying of it.

    uvicorn shuts down gracefully on those signals and then raises the signal again, whose
    default action kills the process on the spot: the workspace was never closed, so the WAL
    was neither checkpointed nor removed (a 138 MiB -wal left behind). Here the signal counts
    as handled: run() returns, and `kbmcp serve` closes the file as on any other exit."""

    def __init__(self, config: uvicorn.Config, display_host: str, page: bool = False) -> None:
        super().__init__(config)
        self.display_host = display_host
        self.page = page
        self.bound_port: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                if self._captured_signals:
                    logger.info("stopping on signal %s", self._captured_signals[-1])
                self._captured_signals.clear()  # handled: nothing to raise again

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit or not self.servers:
            return
        self.bound_port = self.servers[0].sockets[0].getsockname()[1]
        print(
            f"kbmcp: listening on http://{self.display_host}:{self.bound_port}{MCP_PATH}",
            file=sys.stderr,
            flush=True,
        )
        if self.page:
            print(
                f"kbmcp: the web page is at http://{self.display_host}:{self.bound_port}/",
                file=sys.stderr,
                flush=True,
            )


def run_http(
    server: MCPServer,
    *,
    host: str,
    port: int,
    verifier: StoreTokenVerifier | None = None,
    warm_up: Callable[[], None] | None = None,
    log_level: str = "warning",
    web: Callable[[ASGIApp], ASGIApp] | None = None,
) -> None:
    """Serve HTTP (kbmcp/server/http_app.py): with `verifier`, every /mcp request needs a bearer
    token. The socket is bound first, so a port in use or an unknown host is one ListenError
    line (before the model loads) instead of uvicorn's log and exit. `web` puts the web page
    next to the MCP app (kbmcp/web/app.py `with_web_ui`), inside the same Host check and size
    limit."""
    limits = session_limits_from_env()  # a bad setting is an error before anything starts
    listener = bind_listener(host, port)
    if warm_up is not None:
        warm_up()
    if verifier is not None and not binds_loopback_only(host):
        print(
            f"kbmcp: bearer tokens travel in clear text over plain HTTP on {host}: put a "
            'TLS-terminating reverse proxy in front (docs/security.md, "On a network")',
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(
        # (a body must arrive in time: kbmcp/server/http_body.py)
        BodyDeadline(http_app(server, verifier=verifier, limits=limits, web=web)),
        host=host,
        port=port,
        log_level=log_level.lower(),
        access_log=False,
        lifespan="on",
    )
    display_host = f"[{host}]" if ":" in host else host
    _AnnouncingServer(config, display_host, page=web is not None).run(sockets=[listener])


class ListenError(KbError):
    code = "listen_failed"


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: one the OS picks)."""
    try:
        family, kind, proto, address = listen_address(host, port)
    except socket.gaierror as exc:
        raise ListenError(
            f"cannot listen on {host}:{port}: unknown host ({exc.strerror})"
        ) from None
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        hint = (
            " (is another kbmcp serve running? choose another --port)"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise ListenError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}",
            details={"host": host, "port": port},
        ) from None
    listener.set_inheritable(True)
    return listener
