"""Resumable HTTP streams, each session's its own: SSE resumability for streamable HTTP.

With an event store the SDK opens each SSE response with a priming event (an id and empty data,
plus the `retry` field telling the client how long to wait before reconnecting), and a client
whose stream dropped can reconnect with `GET /mcp` and `Last-Event-ID` and receive what it missed.

The SDK gives one event store to every session and asks it for "the events after this id in the
same stream"; a stream is named by the JSON-RPC request id, so every session's request 2 is
stream "2". A store shared by all sessions therefore replays one session's responses to another
that names an event id of its own. Here every session gets its own `SessionEvents` view:
- its event ids count from 1 within the session (they say nothing of other sessions' traffic)
  and a replay looks only at the session's own events: another session's id is unknown here;
- every response is kept with what the session's token could read when it was stored (the
  knowledge bases and memory stores, by row id); a replay asks what the token can read now and
  replays nothing unless the token is still usable and each replayed event's set is still
  readable: a revoked token or an unshared knowledge base replays nothing (a request with a
  revoked token is refused with 401 before it gets here, as every request is);
- a session's events are dropped when the session ends (`ResumptionEvents.drop`).
One `ResumptionEvents` holds every session's events under one bound: only the newest MAX_EVENTS
events and MAX_EVENT_BYTES of their JSON are kept. kbmcp's responses are single results, so a
client reconnects within seconds or not at all, and memory stays flat on a long-running server.

Events are kept as their JSON text, parsed again only when replayed: MAX_EVENT_BYTES then bounds
what they cost the server (a parsed search result costs about 1.5x its JSON in Python objects).
Limit: a share revoked while a response is being written (between the tool reading the data and
the response being stored) is missed by the check, as it is by the live stream that delivers
that response at the same moment.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage
from pydantic import TypeAdapter

MAX_EVENTS = 1000
MAX_EVENT_BYTES = 8 * 1024 * 1024  # of the messages' JSON
RETRY_MS = 1000  # the `retry` field: how long a client waits before reconnecting
MESSAGE = TypeAdapter[JSONRPCMessage](JSONRPCMessage)

logger = logging.getLogger(__name__)

# What a session's token can read now, by knowledge-base and memory-store row id; None once the
# token is no longer usable.
ReadableNow = Callable[[], Awaitable[frozenset[int] | None]]
NOTHING: frozenset[int] = frozenset()


async def local_owner_reads_everything() -> frozenset[int]:
    """Without authentication there is one caller, the local owner: nothing to re-check (its
    events still belong to their session)."""
    return NOTHING


@dataclass(frozen=True)
class _Event:
    stream_id: StreamId
    text: str | None  # the message's JSON; None for a priming event
    # What the session could read when the event was stored; None: its token was not usable
    # any more, and the event never replays.
    readable: frozenset[int] | None

    @property
    def size(self) -> int:
        """What a kept event's text costs, in bytes (close to what it takes in memory)."""
        return 0 if self.text is None else len(self.text.encode())


class ResumptionEvents:
    """Every session's kept events, oldest first, under one bound in count and bytes."""

    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: OrderedDict[tuple[str, EventId], _Event] = OrderedDict()
        self.stored_bytes = 0

    def session(
        self, session_id: str, readable_now: ReadableNow = local_owner_reads_everything
    ) -> SessionEvents:
        """The event store of one session."""
        return SessionEvents(self, session_id, readable_now)

    def drop(self, session_id: str) -> None:
        """Forget every event of a session that ended."""
        for key in [key for key in self._events if key[0] == session_id]:
            self.stored_bytes -= self._events.pop(key).size

    def __len__(self) -> int:
        return len(self._events)

    def _keep(self, session_id: str, event_id: EventId, event: _Event) -> None:
        self._events[session_id, event_id] = event
        self.stored_bytes += event.size
        while len(self._events) > self.max_events or (
            self.stored_bytes > self.max_bytes and len(self._events) > 1
        ):
            _, dropped = self._events.popitem(last=False)
            self.stored_bytes -= dropped.size

    def _after(
        self, session_id: str, last_event_id: EventId
    ) -> tuple[StreamId, list[tuple[EventId, _Event]]] | None:
        """The stream of `last_event_id` (None when this session has no such event) and the
        session's later events in that stream that carry a message."""
        last = self._events.get((session_id, last_event_id))
        if last is None:
            return None
        later: list[tuple[EventId, _Event]] = []
        seen_last = False
        for (owner, event_id), event in self._events.items():
            if owner != session_id:
                continue
            if seen_last and event.stream_id == last.stream_id and event.text is not None:
                later.append((event_id, event))
            seen_last = seen_last or event_id == last_event_id
        return last.stream_id, later


class SessionEvents(EventStore):
    """One session's resumable events (see the module's docstring)."""

    def __init__(self, events: ResumptionEvents, session_id: str, readable_now: ReadableNow):
        self._events = events
        self._session_id = session_id
        self._readable_now = readable_now
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        if message is None:  # a priming event: no content, nothing to authorise
            event = _Event(stream_id, None, NOTHING)
        else:
            text = message.model_dump_json(by_alias=True)
            event = _Event(stream_id, text, await self._readable_or_none())
        self._events._keep(self._session_id, event_id, event)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._events._after(self._session_id, last_event_id)
        if found is None:
            return None
        stream_id, later = found
        if later:
            now = await self._readable_or_none()
            if now is None or any(
                event.readable is None or not event.readable <= now for _, event in later
            ):
                # Replays nothing, not even the events that would still be readable: a stream
                # with a hole would be worse than none (the client asks again).
                logger.info("refused to replay a stream: its token no longer reads what it held")
                return None
        for event_id, event in later:
            assert event.text is not None
            await send_callback(EventMessage(MESSAGE.validate_json(event.text), event_id))
        return stream_id

    async def _readable_or_none(self) -> frozenset[int] | None:
        """What the session's token reads now; None also when that cannot be checked (the
        database is unreachable): the event is kept, never replayed, and the live stream
        carries on."""
        try:
            return await self._readable_now()
        except Exception as error:
            logger.warning("cannot check what an HTTP session's token reads: %s", error)
            return None
