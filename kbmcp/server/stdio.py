"""stdio serving that answers every line and stops cleanly.

- A line that is not JSON, not valid Unicode (a lone surrogate escape such as "\\ud800") or not
  a JSON-RPC message gets a JSON-RPC error (-32700 or -32600) and the server keeps serving. The
  SDK drops such lines silently, so a client would wait for its time-out. When the request id
  can still be read, the error carries it.
- A request whose id is not a string or an integer (`null`, `1.5`, `true`, a list) is -32600:
  the SDK would read it as a notification (no reply ever).
- JSON nested too deeply to parse is one log line and a parse error, never a traceback.
- A line longer than the limit (kbmcp/server/stdio_lines.py, KBMCP_STDIO_MAX_LINE_BYTES,
  default 4 MiB) is dropped as it arrives and answered with one -32600 error; lines are read in
  linear time whatever their length.
- At the end of stdin, every request read before it is answered (the SDK would cancel those
  still running), then the server exits with status 0.
- When the client closes the server's stdout (nothing can reach it any more) the server stops
  at once, exit status 0, instead of serving until stdin closes and then failing; SIGTERM and
  SIGINT stop it the same way (the caller then closes the file, checkpointing the WAL).

The server reads its own stdin and writes its own private duplicate of stdout (fd 1 itself
points at stderr meanwhile, so nothing a library prints can corrupt the stream), so it can see
each raw line before the SDK parses it and notice the client hanging up.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import select
import signal
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from kbmcp.server.protocol import lowlevel
from kbmcp.server.stdio_lines import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_LINE_ENV,
    LongLine,
    read_lines,
    top_level_id,
)

logger = logging.getLogger(__name__)
SHOWN_CHARS = 200  # of the offending input, in the log (never the whole line)
HANGUP_POLL_MS = 200  # how often the stdout watcher wakes up to see whether to stop
CANCELLED = "notifications/cancelled"


async def serve_stdio(server: MCPServer, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
    try:
        await _serve(server, max_line_bytes)
    except* (BrokenPipeError, ConnectionResetError):
        # A reply found stdout closed before the watcher noticed: the same clean stop.
        logger.info("the client closed stdout: stopping")


async def _serve(server: MCPServer, max_line_bytes: int) -> None:
    low = lowlevel(server)
    with private_stdio() as (input_fd, stdout):
        rejected_send, rejected = anyio.create_memory_object_stream[JSONRPCError](16)
        lines = checked_lines(stdin_lines(input_fd, max_line_bytes), rejected_send)
        streams = stdio_server(stdin=lines, stdout=anyio.wrap_file(stdout))  # type: ignore[arg-type]
        # The SDK's transport waits for the end of stdin on exit; a closed stdout must not.
        with anyio.CancelScope() as everything:
            async with streams as (read_stream, write_stream):
                open_requests = OpenRequests()
                send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                replies_send, replies = anyio.create_memory_object_stream[SessionMessage](0)

                async def relay() -> None:
                    async with send:
                        async for item in read_stream:
                            if isinstance(item, Exception):
                                await _answer(write_stream, item)
                            else:
                                open_requests.read(item.message)
                                await send.send(item)
                        # The end of stdin. The SDK cancels the requests still running when
                        # its input ends, so its input ends once every one is answered.
                        await open_requests.all_answered()

                async def forward_replies() -> None:
                    async with replies:
                        async for reply in replies:
                            await write_stream.send(reply)
                            open_requests.answered(reply.message)

                async def answer_rejected() -> None:
                    async with rejected:
                        async for reply in rejected:
                            await write_stream.send(SessionMessage(reply))

                async with anyio.create_task_group() as watchers:
                    watchers.start_soon(_stop_when_stdout_closes, stdout.fileno(), everything)
                    watchers.start_soon(_stop_on_signals, everything)
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(relay)
                        tasks.start_soon(answer_rejected)
                        tasks.start_soon(forward_replies)
                        # The SDK closes `replies_send` when it is done: forward_replies ends.
                        await low.run(receive, replies_send, low.create_initialization_options())
                    # Every reply is on its way to stdout: the SDK's writer ends with this.
                    await write_stream.aclose()
                    watchers.cancel_scope.cancel()


class OpenRequests:
    """The client's requests read from stdin and not answered yet (by id): at the end of stdin
    the server waits for them. A request the client cancels is never answered (MCP), so a
    cancellation closes it too."""

    def __init__(self) -> None:
        self._open: Counter[str | int] = Counter()
        self._changed = anyio.Event()

    def read(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest):
            self._open[message.id] += 1
        elif isinstance(message, JSONRPCNotification) and message.method == CANCELLED:
            request_id = cancelled_request_id_from_params(message.params)
            if request_id is not None:
                self._close(request_id)

    def answered(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._close(message.id)

    def _close(self, request_id: str | int) -> None:
        if self._open[request_id] > 0:
            self._open[request_id] -= 1
        self._open = +self._open  # (drops the ids at zero)
        self._changed.set()

    async def all_answered(self) -> None:
        while self._open:
            self._changed = anyio.Event()
            await self._changed.wait()


async def stdin_lines(
    fd: int, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> AsyncIterator[str | LongLine]:
    """The lines of the input descriptor (kbmcp/server/stdio_lines.py), read by a daemon thread
    with plain os.read: a blocking read never holds up a stop (an anyio worker thread reading
    stdin can be neither cancelled nor left behind at exit), and no Python file object is left
    locked by the thread when the interpreter shuts down. Undecodable bytes become U+FFFD, as
    in the SDK's own reader; a line over `max_line_bytes` comes as a `LongLine`."""
    send, receive = anyio.create_memory_object_stream[str | LongLine](8)
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        gone = (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError)
        with contextlib.suppress(*gone):  # the loop or the reader has stopped
            try:
                for line in read_lines(fd, max_line_bytes):
                    anyio.from_thread.run(send.send, line, token=token)
            finally:
                anyio.from_thread.run(send.aclose, token=token)  # end of input

    threading.Thread(target=pump, name="kbmcp-stdin", daemon=True).start()
    async with receive:
        async for line in receive:
            yield line


@contextlib.contextmanager
def private_stdio() -> Iterator[tuple[int, io.TextIOWrapper]]:
    """The protocol's input descriptor and output stream: private duplicates of stdin and
    stdout, while fd 0 reads /dev/null and fd 1 writes to stderr (nothing else can take the
    client's input or corrupt the stream). Both restored on exit."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    stdout = _unowned_text(os.fdopen(wire_out, "wb", closefd=False))
    try:
        yield wire_in, stdout
    finally:
        with contextlib.suppress(OSError, ValueError):
            stdout.flush()
        os.dup2(wire_out, 1)
        os.dup2(wire_in, 0)
        os.close(wire_out)
        # wire_in stays open: the reader thread may still be blocked on it until the process
        # exits (closing a descriptor under a blocked read could hand its number to a new file).


class _UnownedText(io.TextIOWrapper):
    """UTF-8 text over a buffer it does not own: closing (or collecting) it leaves the buffer."""

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.detach()


def _unowned_text(buffer: Any) -> io.TextIOWrapper:
    return _UnownedText(buffer, encoding="utf-8", newline="\n")


async def checked_lines(
    lines: AsyncIterator[str | LongLine], rejected: MemoryObjectSendStream[JSONRPCError]
) -> AsyncIterator[str]:
    """The lines of stdin, except lines over the limit and requests with an id that is not a
    string or an integer: those are answered with -32600 through `rejected` instead."""
    async with rejected:
        async for line in lines:
            reply = long_line_reply(line) if isinstance(line, LongLine) else invalid_id_reply(line)
            if reply is None:
                yield line  # type: ignore[misc]  (a str: a LongLine always has a reply)
            else:
                await rejected.send(reply)


def long_line_reply(line: LongLine) -> JSONRPCError:
    """-32600 for a line over the limit, under its id when its start shows one."""
    logger.warning(
        "a line of %d bytes on stdin, over the limit of %d (%s): refused unread",
        line.size,
        line.limit,
        MAX_LINE_ENV,
    )
    message = (
        f"Invalid request: the message is {line.size} bytes long, over the limit of "
        f"{line.limit} bytes ({MAX_LINE_ENV}); no request kbmcp serves needs that much"
    )
    return JSONRPCError(
        jsonrpc="2.0", id=line.request_id, error=ErrorData(code=INVALID_REQUEST, message=message)
    )


def invalid_id_reply(line: str) -> JSONRPCError | None:
    """-32600 for a request (it has a method) whose id is there but not a string or an integer.
    MCP forbids a null id and JSON-RPC fractional ones; the SDK would drop the line as a
    notification. Lines that are not JSON objects are left to the SDK (and `_answer`)."""
    parsed = _parsed(line)
    if not isinstance(parsed, dict) or "method" not in parsed or "id" not in parsed:
        return None
    request_id = parsed["id"]
    if isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    ):
        return None
    shown = json.dumps(request_id)[:SHOWN_CHARS]
    logger.warning("request with an invalid id on stdin: %s", shown)
    message = f"Invalid request: the id must be a string or an integer, got {shown}"
    return JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message)
    )


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    """SIGTERM (a client or supervisor stopping the server) and SIGINT end serving like the end
    of stdin does, so `kbmcp serve` closes the file (checkpointing the WAL) before it exits;
    the default action would kill the process on the spot. Not on Windows (no such signals)."""
    if sys.platform == "win32":
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("stopping on signal %s", signum)
            scope.cancel()
            return


async def _stop_when_stdout_closes(fd: int, scope: anyio.CancelScope) -> None:
    """Cancel `scope` when the client closes its end of stdout (POLLERR/POLLHUP on the pipe):
    no reply can reach it any more. Not available without poll(2) (Windows): there the server
    stops at the next write."""
    if not hasattr(select, "poll"):
        return
    stop = threading.Event()
    try:
        closed = await anyio.to_thread.run_sync(_wait_for_hangup, fd, stop, abandon_on_cancel=True)
    finally:
        stop.set()
    if closed:
        logger.info("the client closed stdout: stopping")
        scope.cancel()


def _wait_for_hangup(fd: int, stop: threading.Event) -> bool:
    poller = select.poll()
    poller.register(fd, 0)  # no events asked: only errors and hang-ups are reported
    while not stop.is_set():
        for _, events in poller.poll(HANGUP_POLL_MS):
            if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                return True
    return False


async def _answer(write_stream: Any, error: Exception) -> None:
    try:
        reply = unparseable_reply(error)
    except Exception:  # never let one bad line end the server
        logger.exception("could not build the reply to an unparseable message")
        reply = JSONRPCError(
            jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="Parse error")
        )
    await write_stream.send(SessionMessage(reply))


def unparseable_reply(error: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the SDK could not turn into a message."""
    raw = _raw_input(error)
    logger.warning("unparseable message on stdin: %s", repr(raw)[:SHOWN_CHARS])
    not_json = not isinstance(error, ValidationError) or any(
        e["type"] == "json_invalid" for e in error.errors()
    )
    request_id = _request_id(raw)
    if not_json:
        code, message = PARSE_ERROR, "Parse error: the message is not valid JSON"
        if _too_deep(error):
            message = "Parse error: the message is nested too deeply to read"
            # No parser reads it whole, but its id is readable: the client waits for that id.
            # (Invalid JSON keeps id null, as JSON-RPC asks: its id cannot be trusted.)
            request_id = _deep_request_id(raw)
        elif _lone_surrogate(raw):
            message = "Parse error: the message contains a lone surrogate (\\ud800-\\udfff escape)"
    else:
        code = INVALID_REQUEST
        message = "Invalid request: not a JSON-RPC 2.0 request, notification or response"
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _deep_request_id(raw: Any) -> str | int | None:
    """The top-level id of a line nested too deeply to parse (kbmcp/server/stdio_lines.py)."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    return top_level_id(raw) if isinstance(raw, str) else None


def _too_deep(error: Exception) -> bool:
    """pydantic's JSON parser stops at its recursion limit (a few hundred levels)."""
    return isinstance(error, ValidationError) and any(
        "recursion limit" in e["msg"] for e in error.errors()
    )


def _raw_input(error: Exception) -> Any:
    if isinstance(error, ValidationError) and error.errors():
        return error.errors()[0].get("input")
    return None


def _parsed(raw: Any) -> Any:
    """The line as Python's lenient JSON parser reads it (it accepts lone surrogates)."""
    if isinstance(raw, str | bytes):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
            return None
    return raw


def _lone_surrogate(raw: Any) -> bool:
    parsed = _parsed(raw)
    return parsed is not None and not _is_unicode(json.dumps(parsed, ensure_ascii=False))


def _request_id(raw: Any) -> str | int | None:
    parsed = _parsed(raw)
    if not isinstance(parsed, dict):
        return None
    request_id = parsed.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if isinstance(request_id, str) and not _is_unicode(request_id):
        return None  # it could not be written back
    return request_id


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
