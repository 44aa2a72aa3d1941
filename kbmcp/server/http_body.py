"""HTTP clients that stall or hang up while sending a request body.

- A request body must arrive whole within BODY_TIMEOUT_ENV seconds (default 30) of the server
  starting to read it. A client that stops sending (50 connections with half a body each stayed
  open for ever, and held a SIGTERM's graceful shutdown with them) is answered 408 with a
  JSON-RPC error, its connection closed, and one warning line logged.
- A client that disconnects before its body has arrived is one warning line. The SDK would log
  each as an ERROR with a traceback (`Error handling POST request ... ClientDisconnect`); that
  record is dropped (`QuietClientDisconnect`), since this line says it.

`BodyDeadline` wraps `receive` and does not buffer the body: the SDK reads it as before, at
uvicorn's pace. When the deadline passes, the SDK is told the client disconnected (and its
answer, which could no longer reach anyone, is dropped).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping

import anyio
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbmcp.config import seconds_from_env
from kbmcp.server.http_limits import content_length, send_error_and_close

logger = logging.getLogger(__name__)

BODY_TIMEOUT_ENV = "KBMCP_HTTP_BODY_TIMEOUT_SECONDS"
DEFAULT_BODY_TIMEOUT_SECONDS = 30.0
SDK_HTTP_LOGGER = "mcp.server.streamable_http"


def body_timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """BODY_TIMEOUT_ENV (seconds > 0) or the default."""
    return seconds_from_env(BODY_TIMEOUT_ENV, DEFAULT_BODY_TIMEOUT_SECONDS, environ)


class BodyDeadline:
    """ASGI middleware: a request body arrives within `timeout` seconds or is answered 408
    (default: BODY_TIMEOUT_ENV); a client that hangs up during its body is one log line."""

    def __init__(self, app: ASGIApp, timeout: float | None = None) -> None:
        self.app = app
        self.timeout = body_timeout_from_env() if timeout is None else timeout
        quiet_client_disconnects()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _Body(scope, receive, send, self.timeout)
        await self.app(scope, body.receive, body.send)


class _Body:
    """One request's body as the app receives it, against its deadline."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, timeout: float) -> None:
        self._scope = scope
        self._receive = receive
        self._send = send
        self._timeout = timeout
        self._deadline: float | None = None  # set when the app first asks for the body
        self._complete = False  # the last part of the body has arrived
        self._gone = False  # the client is gone or was answered: nothing more is sent
        self._received = 0

    async def receive(self) -> Message:
        if self._complete or self._gone:
            return await self._receive()  # (after the body: a disconnect, for a stream)
        if self._deadline is None:
            self._deadline = time.monotonic() + self._timeout
        message: Message | None = None
        with anyio.move_on_after(max(0.0, self._deadline - time.monotonic())):
            message = await self._receive()
        if message is None:
            await self._answer_timeout()
            return {"type": "http.disconnect"}
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            self._complete = not message.get("more_body", False)
        elif message["type"] == "http.disconnect":
            self._gone = True
            logger.warning(
                "%s disconnected before its request body arrived (%s): the request is dropped",
                self._client(),
                self._progress(),
            )
        return message

    async def send(self, message: Message) -> None:
        if not self._gone:
            await self._send(message)

    async def _answer_timeout(self) -> None:
        self._gone = True
        logger.warning(
            "%s did not send its request body within %g s (%s, %s): answered 408 and closed "
            "the connection",
            self._client(),
            self._timeout,
            self._progress(),
            BODY_TIMEOUT_ENV,
        )
        message = (
            f"request body timed out: {self._progress()} within {self._timeout:g} s; "
            "send the whole request at once"
        )
        with contextlib.suppress(OSError):  # it went away meanwhile
            await send_error_and_close(self._send, 408, message)

    def _client(self) -> str:
        client = self._scope.get("client")
        method, path = self._scope.get("method", "?"), self._scope.get("path", "?")
        who = f"{client[0]}:{client[1]}" if client else "a client"
        return f"{method} {path} from {who}"

    def _progress(self) -> str:
        expected = content_length(self._scope)
        of = f" of {expected}" if expected is not None else ""
        return f"{self._received}{of} bytes received"


class QuietClientDisconnect(logging.Filter):
    """Drops the SDK's ERROR record (with its traceback) for a client that disconnected while
    its request body was read: `BodyDeadline` logs that as one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ClientDisconnect))


def quiet_client_disconnects() -> None:
    sdk = logging.getLogger(SDK_HTTP_LOGGER)
    if not any(isinstance(existing, QuietClientDisconnect) for existing in sdk.filters):
        sdk.addFilter(QuietClientDisconnect())
