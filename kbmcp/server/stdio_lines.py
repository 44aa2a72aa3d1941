"""Reading stdin into lines: linear time, and a bound on the length of one line.

- Each read is searched for newlines once; the bytes of a line that is not complete yet are
  kept as a list of pieces and joined once, when its newline arrives. (The reader this replaced
  appended every 64 KiB read to the pending bytes and split all of them again: a 50 MiB line
  took ~17-30 s of CPU, during which no other line was read.)
- A line longer than the limit (MAX_LINE_ENV, default DEFAULT_MAX_LINE_BYTES) is not kept: its
  bytes are dropped as they arrive, and it comes out as one `LongLine` (its size, and the
  request id read from its first ID_SCAN_BYTES), which the server answers with one JSON-RPC
  error. No request kbmcp serves comes near the limit: the largest argument, a memory's
  content, is capped at 20,000 characters.
- `top_level_id` reads the `id` of a JSON-RPC request from its text without parsing the rest,
  for lines that cannot be parsed whole (nested too deeply, or too long to keep): the client
  then gets its error under the id it is waiting for, not `id: null`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kbmcp.config import number_from_env

MAX_LINE_ENV = "KBMCP_STDIO_MAX_LINE_BYTES"
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
READ_BYTES = 1 << 16
# How much of a line (its start) is searched for the request id when the line is not parsed
# whole. Clients write "jsonrpc", "id", "method", then "params": the id is near the start.
ID_SCAN_BYTES = 64 * 1024


@dataclass(frozen=True)
class LongLine:
    """A line longer than the limit, dropped unread."""

    size: int  # its bytes, without the newline
    limit: int
    request_id: str | int | None  # the top-level id, when its start shows one


def max_line_bytes_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The line limit of stdio: MAX_LINE_ENV (bytes, >= 1024) or the default."""
    return number_from_env(
        MAX_LINE_ENV,
        DEFAULT_MAX_LINE_BYTES,
        int,
        lambda limit: limit >= 1024,
        "a whole number of bytes >= 1024",
        environ,
    )


def read_lines(fd: int, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[str | LongLine]:
    """The lines of descriptor `fd` (each with its "\\n"; the last may lack it), decoded as
    UTF-8 with U+FFFD for undecodable bytes, as the SDK's reader does; a line over
    `max_line_bytes` as a `LongLine`. Ends at end of input (or a read error)."""
    line = _LineBuffer(max_line_bytes)
    while True:
        try:
            chunk = os.read(fd, READ_BYTES)
        except OSError:
            chunk = b""
        if not chunk:
            if not line.empty:
                yield line.take(newline=False)
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line.add(chunk[start:end])
            yield line.take(newline=True)
            start = end + 1
        line.add(chunk[start:])


class _LineBuffer:
    """The line being read: its pieces while it is under the limit, then only its size and
    the start it was seen with."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pieces: list[bytes] = []
        self.size = 0
        self.head: bytes | None = None  # set once the line is over the limit

    @property
    def empty(self) -> bool:
        return self.size == 0

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.size += len(piece)
        if self.head is not None:
            return
        if self.size <= self.limit:
            self.pieces.append(piece)
            return
        self.head = b"".join([*self.pieces, piece[:ID_SCAN_BYTES]])[:ID_SCAN_BYTES]
        self.pieces = []

    def take(self, *, newline: bool) -> str | LongLine:
        if self.head is not None:
            head = self.head.decode("utf-8", errors="replace")
            taken: str | LongLine = LongLine(self.size, self.limit, top_level_id(head))
        else:
            taken = b"".join(self.pieces).decode("utf-8", errors="replace")
            taken += "\n" if newline else ""
        self.pieces, self.size, self.head = [], 0, None
        return taken


# ---------------------------------------------------------------------- the top-level id

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"[^,}\]\s]*")
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NESTING = re.compile(r'["{}\[\]]')


def top_level_id(text: str) -> str | int | None:
    """The value of the top-level "id" key of the JSON object that `text` starts with, when
    it is a string or an integer and lies within the first ID_SCAN_BYTES characters; else
    None. The rest of the text is not parsed (it may be cut, or nested past any parser's
    limit): values before the id are skipped by matching brackets and strings only."""
    text = text[:ID_SCAN_BYTES]
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        return None
    at += 1
    while True:
        at = _skip_space(text, at)
        key = _STRING.match(text, at)
        if key is None:
            return None
        at = _skip_space(text, key.end())
        if not text.startswith(":", at):
            return None
        at = _skip_space(text, at + 1)
        if json.loads(key.group()) == "id":
            return _id_value(text, at)
        at = _skip_value(text, at)
        if at is None:
            return None
        at = _skip_space(text, at)
        if not text.startswith(",", at):
            return None  # the object ended (or the text did) without an id
        at += 1


def _skip_space(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return at if match is None else match.end()


def _id_value(text: str, at: int) -> str | int | None:
    """A string or integer id at `at`, followed by the end of its value (so `1.5` is not 1)."""
    match = _STRING.match(text, at) or _INTEGER.match(text, at)
    if match is None:
        return None
    after = _skip_space(text, match.end())
    if after < len(text) and text[after] not in ",}":
        return None
    try:
        value = json.loads(match.group())
    except ValueError:
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # a lone surrogate escape could not be written back
        except UnicodeEncodeError:
            return None
    return value if isinstance(value, str | int) else None


def _skip_value(text: str, at: int) -> int | None:
    """The position after the JSON value at `at` (None: it does not end within `text`)."""
    if text.startswith('"', at):
        match = _STRING.match(text, at)
        return None if match is None else match.end()
    if not text.startswith(("{", "["), at):
        match = _SCALAR.match(text, at)
        return None if match is None else match.end()
    depth = 0
    while True:
        found = _NESTING.search(text, at)
        if found is None:
            return None
        mark = found.group()
        if mark == '"':
            string = _STRING.match(text, found.start())
            if string is None:
                return None
            at = string.end()
            continue
        depth += 1 if mark in "{[" else -1
        at = found.end()
        if depth == 0:
            return at
