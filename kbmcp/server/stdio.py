"""stdio serving that answers every line: a line that is not JSON, not valid Unicode (a lone
surrogate escape such as "\\ud800") or not a JSON-RPC message gets a JSON-RPC error (-32700 or
-32600) and the server keeps serving. The SDK drops such lines silently, so a client would wait
for its time-out. When the request id can still be read, the error carries it."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from kbmcp.server.protocol import lowlevel

logger = logging.getLogger(__name__)
SHOWN_CHARS = 200  # of the offending input, in the log (never the whole line)


async def serve_stdio(server: MCPServer) -> None:
    low = lowlevel(server)
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await _answer(write_stream, item)
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(relay)
            await low.run(receive, write_stream, low.create_initialization_options())
            tasks.cancel_scope.cancel()


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
    if not_json:
        code, message = PARSE_ERROR, "Parse error: the message is not valid JSON"
        if _lone_surrogate(raw):
            message = "Parse error: the message contains a lone surrogate (\\ud800-\\udfff escape)"
    else:
        code = INVALID_REQUEST
        message = "Invalid request: not a JSON-RPC 2.0 request, notification or response"
    return JSONRPCError(
        jsonrpc="2.0", id=_request_id(raw), error=ErrorData(code=code, message=message)
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
        except ValueError:
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
