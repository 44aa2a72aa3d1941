"""DNS-rebinding protection for an HTTP server that runs without authentication.

Without tokens the server answers anyone who reaches it as the local owner, so it binds loopback
only. A web page on another site can still reach a loopback server: it points its own domain at
127.0.0.1 (DNS rebinding) and the browser sends the request with that domain in `Host` and the
page's site in `Origin`. Such a request is refused unless both name this machine: `Host` must be
a loopback name (`localhost`, any 127.0.0.0/8 address, ::1, in any spelling: `LOCALHOST`,
`0:0:0:0:0:0:0:1`, `[::ffff:127.0.0.1]`) and `Origin`, when sent, an http(s) origin on one.

The SDK's own check compares the exact strings `127.0.0.1`, `localhost` and `[::1]` and only when
the server binds one of those three spellings; this one normalises every spelling first and
applies whatever loopback spelling the server binds. With tokens the check is not applied: a
rebound page has no token, and a TLS reverse proxy in front forwards its own public `Host`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

INVALID_REQUEST = -32600
SHOWN_CHARS = 100  # of a refused header, in the log and the reply
LOCALHOST = "localhost"


def is_loopback_name(name: str) -> bool:
    """Whether a host name or address (no port; IPv6 with or without brackets) is this machine:
    `localhost` (any case, a trailing dot allowed) or a loopback address in any spelling."""
    name = name.strip().removeprefix("[").removesuffix("]").lower()
    if name.removesuffix(".") == LOCALHOST:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            # `[::1%evil.example]`: Python accepts any text as a zone id, and a zone means
            # nothing on loopback, so no client of this machine needs one.
            return False
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped.is_loopback
    return address.is_loopback


ListenAddress = tuple[socket.AddressFamily, socket.SocketKind, int, tuple[Any, ...]]


def listen_address(host: str, port: int) -> ListenAddress:
    """What binding `host:port` binds: the resolver's first answer (family, socket type,
    protocol, address). Raises `socket.gaierror` for a name that does not resolve."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip().removeprefix("[").removesuffix("]"),
        port,
        type=socket.SOCK_STREAM,
        flags=socket.AI_PASSIVE,
    )[0]
    return family, kind, proto, address


def binds_loopback_only(host: str) -> bool:
    """Whether a server bound to `host` is reachable from this machine only. Judged by the
    address the name resolves to, not by the name: `localhost.` is a name like any other to
    the resolver, which may answer with any address."""
    try:
        *_, address = listen_address(host, 0)
    except (OSError, UnicodeError):  # does not resolve: nothing would be bound
        return False
    return is_loopback_name(str(address[0]))


def _host_name(host: str) -> str | None:
    """The name part of a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`)."""
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return host[1:end]
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    return name


def loopback_host(host: str | None) -> bool:
    if not host:
        return False
    name = _host_name(host)
    return name is not None and is_loopback_name(name)


def loopback_origin(origin: str | None) -> bool:
    """An absent Origin is a same-origin or non-browser request; `null` (a sandboxed page, a
    file) is not a loopback origin."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
        _ = parts.port  # a malformed port raises here
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and loopback_host(parts.netloc)


class LoopbackOnly:
    """Refuses requests whose Host or Origin names another machine: 421 for the Host, 403 for
    the Origin (the SDK's status codes), with a JSON-RPC error body saying why."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host, origin = _header(scope, b"host"), _header(scope, b"origin")
        if not loopback_host(host):
            await _refuse(send, 421, "Host", host)
        elif not loopback_origin(origin):
            await _refuse(send, 403, "Origin", origin)
        else:
            await self.app(scope, receive, send)


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return value.decode("latin-1")
    return None


async def _refuse(send: Send, status: int, header: str, value: str | None) -> None:
    shown = "missing" if value is None else repr(value[:SHOWN_CHARS])
    logger.warning("refused a request: %s header %s is not a loopback name", header, shown)
    message = (
        f"{header} header {shown} is not a loopback name: this server runs without "
        "authentication and answers only requests addressed to this machine (DNS-rebinding "
        "protection); connect to the address it listens on, or create a token "
        "(`kbmcp token create`) to serve other names"
    )
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
