"""Streamable HTTP sessions: how long an idle one lives and how many are kept.

A session costs ~40 KiB of server memory (its server task, streams and state) until the client
ends it with DELETE. Clients that just go away never do: with the SDK's defaults (30 minutes,
10,000 sessions) such sessions took 466 MiB and then every new client was refused with 503.

- An idle session (no request in flight, no open GET stream) ends after IDLE_ENV seconds
  (default DEFAULT_IDLE_SECONDS); its id then answers 404 and the client starts a new session,
  as the MCP specification requires.
- At most MAX_ENV sessions are kept (default DEFAULT_MAX_SESSIONS, ~40 MiB). When a new
  client arrives at the limit, the session idle the longest is ended to make room
  (`EvictIdleSessions`), so abandoned sessions never lock new clients out; only when every
  session is busy is a new one refused (503).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from kbmcp.errors import InvalidRequest

logger = logging.getLogger(__name__)

IDLE_ENV = "KBMCP_SESSION_IDLE_SECONDS"
MAX_ENV = "KBMCP_MAX_SESSIONS"
DEFAULT_IDLE_SECONDS = 300.0
DEFAULT_MAX_SESSIONS = 1000
SESSION_HEADER = b"mcp-session-id"


@dataclass(frozen=True)
class SessionLimits:
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    max_sessions: int = DEFAULT_MAX_SESSIONS


def session_limits_from_env(environ: dict[str, str] | None = None) -> SessionLimits:
    env = os.environ if environ is None else environ
    idle_text = env.get(IDLE_ENV, "").strip()
    max_text = env.get(MAX_ENV, "").strip()
    idle, most = DEFAULT_IDLE_SECONDS, DEFAULT_MAX_SESSIONS
    if idle_text:
        try:
            idle = float(idle_text)
        except ValueError:
            idle = -1.0
        if not (math.isfinite(idle) and idle > 0):
            raise InvalidRequest(f"{IDLE_ENV}={idle_text!r} must be a number of seconds > 0")
    if max_text:
        try:
            most = int(max_text)
        except ValueError:
            most = 0
        if most < 1:
            raise InvalidRequest(f"{MAX_ENV}={max_text!r} must be an integer >= 1")
    return SessionLimits(idle_seconds=idle, max_sessions=most)


class EvictIdleSessions:
    """In front of the SDK's session manager: a request that would open a session while
    `max_sessions` are open first ends the one idle the longest.

    It reads the manager's session table and each transport's idle deadline (the SDK sets it to
    "last request finished + idle timeout", and to infinity while a request is in flight), and
    ends a session the way its idle timeout does: by cancelling its idle scope. The session is
    dropped from the table at once, so the admission check that follows sees the room."""

    def __init__(self, app: ASGIApp, manager: Callable[[], Any], max_sessions: int) -> None:
        self.app = app
        self._manager = manager
        self.max_sessions = max_sessions
        self._warned = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not _has_session(scope):
            self._make_room()
        await self.app(scope, receive, send)

    def _make_room(self) -> None:
        try:
            manager = self._manager()
            sessions: dict[str, Any] = manager._server_instances
            owners: dict[str, Any] = manager._session_owners
            if len(sessions) < self.max_sessions:
                return
            idle = [
                (transport.idle_scope.deadline, session_id, transport)
                for session_id, transport in sessions.items()
                if transport.idle_scope is not None
                and not transport.idle_scope.cancel_called
                and math.isfinite(transport.idle_scope.deadline)
            ]
        except AttributeError:  # another SDK version: the plain limit (503 when full) applies
            if not self._warned:
                logger.warning("cannot end idle HTTP sessions early with this MCP SDK version")
                self._warned = True
            return
        if not idle:
            return  # every session is busy: the SDK refuses the new one (503)
        _, session_id, transport = min(idle, key=lambda entry: entry[0])
        sessions.pop(session_id, None)
        owners.pop(session_id, None)
        transport.idle_scope.cancel()  # its server task ends and terminates the transport
        logger.info("ended idle HTTP session %s to make room for a new one", session_id[:16])


def _has_session(scope: Scope) -> bool:
    return any(name == SESSION_HEADER for name, _ in scope.get("headers", []))
