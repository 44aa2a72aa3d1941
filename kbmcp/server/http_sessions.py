"""Streamable HTTP sessions: how long an idle one lives and how many are kept.

A session costs ~40 KiB of server memory (its server task, streams and state) until the client
ends it with DELETE. Clients that just go away never do: with the SDK's defaults (30 minutes,
10,000 sessions) such sessions took 466 MiB and then every new client was refused with 503.

- An idle session (no request in flight, no open GET stream) ends after IDLE_ENV seconds
  (default DEFAULT_IDLE_SECONDS); its id then answers 404 and the client starts a new session,
  as the MCP specification requires.
- At most MAX_ENV sessions are kept (default DEFAULT_MAX_SESSIONS, ~40 MiB). When a new
  client arrives at the limit, the session idle the longest is ended to make room
  (`KbSessionManager`), so abandoned sessions never lock new clients out; only when every
  session is busy is a new one refused (503). Only an authenticated request can do that.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from kbmcp.errors import InvalidRequest
from kbmcp.server.event_store import ReadableNow, ResumptionEvents

logger = logging.getLogger(__name__)

IDLE_ENV = "KBMCP_SESSION_IDLE_SECONDS"
MAX_ENV = "KBMCP_MAX_SESSIONS"
DEFAULT_IDLE_SECONDS = 300.0
DEFAULT_MAX_SESSIONS = 1000


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


class KbSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with kbmcp's rules for sessions:

    - Room for a new client: a new session opened while `max_sessions` are open first ends the
      one idle the longest (the SDK would refuse it with 503). It reads each transport's idle
      deadline (the SDK sets it to "last request finished + idle timeout", and to infinity
      while a request is in flight) and ends a session the way its idle timeout does: by
      cancelling its idle scope. Only requests that passed authentication reach the manager
      (kbmcp/server/http_app.py), so a request without a valid token never costs another
      session its place; admission runs under the SDK's session-creation lock.
    - Resumable events per session (kbmcp/server/event_store.py): each new session gets its own
      event store, checked against what the session's token can read now, and its events are
      dropped when the session ends, however it ends.

    Both hook into the SDK's `_admit_session` / `_discard_session` (mcp 2.3 has no public
    seam for either); tests/test_http_sessions.py and tests/test_http_resumption_isolation.py
    fail if an SDK release changes them."""

    def __init__(
        self,
        app: Any,
        *,
        events: ResumptionEvents,
        readable_now: Callable[[str], ReadableNow] | None,
        **settings: Any,
    ) -> None:
        # The manager's own store stays None: a store shared by every session is the leak
        # this class exists to close.
        super().__init__(app, event_store=None, **settings)
        self._events = events
        self._readable_now = readable_now

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        self._make_room()
        transport = super()._admit_session(requestor)
        if transport is None:
            return None
        if not hasattr(transport, "_event_store") or transport.mcp_session_id is None:
            raise RuntimeError("this MCP SDK's HTTP transport has no per-session event store")
        if self._readable_now is None:  # no authentication: the local owner
            store = self._events.session(transport.mcp_session_id)
        else:
            assert requestor is not None  # authentication runs before the manager
            store = self._events.session(
                transport.mcp_session_id, self._readable_now(requestor["client_id"])
            )
        transport._event_store = store
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self._events.drop(session_id)
        await super()._discard_session(session_id, transport)

    def _make_room(self) -> None:
        if self.max_sessions is None or len(self._server_instances) < self.max_sessions:
            return
        idle = [
            (transport.idle_scope.deadline, session_id, transport)
            for session_id, transport in self._server_instances.items()
            if transport.idle_scope is not None
            and not transport.idle_scope.cancel_called
            and math.isfinite(transport.idle_scope.deadline)
        ]
        if not idle:
            return  # every session is busy: the SDK refuses the new one (503)
        _, session_id, transport = min(idle, key=lambda entry: entry[0])
        # Dropped from the table at once, so the admission check that follows sees the room.
        self._server_instances.pop(session_id, None)
        self._session_owners.pop(session_id, None)
        self._events.drop(session_id)
        assert transport.idle_scope is not None
        transport.idle_scope.cancel()  # its server task ends and terminates the transport
        logger.info("ended idle HTTP session %s to make room for a new one", session_id[:16])
