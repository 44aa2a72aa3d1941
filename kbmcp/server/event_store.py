"""A bounded in-memory event store for streamable HTTP: SSE resumability.

With an event store the SDK opens each SSE response with a priming event (an id and empty data,
plus the `retry` field telling the client how long to wait before reconnecting), and a client
whose stream dropped can reconnect with `Last-Event-ID` and receive what it missed. Only the
newest MAX_EVENTS events are kept: kbmcp's responses are single results, so a client reconnects
within seconds or not at all, and memory stays flat on a long-running server.

Events are kept as their JSON text, parsed again only when replayed: MAX_EVENT_BYTES then bounds
what they cost the server (a parsed search result costs about 1.5x its JSON in Python objects).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage
from pydantic import TypeAdapter

MAX_EVENTS = 1000
MAX_EVENT_BYTES = 8 * 1024 * 1024  # of the messages' JSON
RETRY_MS = 1000  # the `retry` field: how long a client waits before reconnecting
MESSAGE = TypeAdapter[JSONRPCMessage](JSONRPCMessage)


class BoundedEventStore(EventStore):
    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        # event id -> (stream, the message's JSON or None for a priming event)
        self._events: OrderedDict[EventId, tuple[StreamId, str | None]] = OrderedDict()
        self._ids = itertools.count(1)
        self.stored_bytes = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        text = None if message is None else message.model_dump_json(by_alias=True)
        self._events[event_id] = (stream_id, text)
        self.stored_bytes += _size(text)
        while len(self._events) > self.max_events or (
            self.stored_bytes > self.max_bytes and len(self._events) > 1
        ):
            _, (_, dropped) = self._events.popitem(last=False)
            self.stored_bytes -= _size(dropped)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        if last_event_id not in self._events:
            return None
        stream_id = self._events[last_event_id][0]
        later = list(self._events.items())
        start = next(i for i, (event_id, _) in enumerate(later) if event_id == last_event_id)
        for event_id, (stream, text) in later[start + 1 :]:
            if stream == stream_id and text is not None:
                await send_callback(EventMessage(MESSAGE.validate_json(text), event_id))
        return stream_id


def _size(text: str | None) -> int:
    """What a kept event's text costs, in bytes (close to what it takes in memory)."""
    return 0 if text is None else len(text.encode())
