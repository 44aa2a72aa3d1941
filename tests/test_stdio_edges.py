"""stdio at its edges (issue 33, items 2 and 3): every request read before the end of stdin is
answered before the server exits; a line is read in linear time, a line over the limit is
refused with one JSON-RPC error without being kept, and an error for a request that cannot be
parsed whole carries the request's id when its start shows one.

The transport handles these before any request reaches the store, so they run on the corpus
file only."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kbmcp.errors import InvalidRequest
from kbmcp.server.stdio_lines import (
    DEFAULT_MAX_LINE_BYTES,
    LongLine,
    max_line_bytes_from_env,
    read_lines,
    top_level_id,
)
from tests import processes
from tests.mcp_support import REPO_ROOT, hash_workspace, rpc_line, subprocess_env

INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}
# `kbmcp serve` with every targeted read taking 2 s longer: a read still running when the
# client closes stdin.
SLOW_READS = (
    "import time\n"
    "from kbmcp.service import read\n"
    "slow = read.read_document\n"
    "def read_document(*args, **kwargs):\n"
    "    time.sleep(2)\n"
    "    return slow(*args, **kwargs)\n"
    "read.read_document = read_document\n"
    "from kbmcp.cli import main\n"
    "main()\n"
)


def serve_session(db: Path, lines: list[str | bytes], *, code: str | None = None, **env: str):
    """Run `kbmcp serve` with `lines` as its whole stdin (closed after them); its replies by id,
    its exit status and its stderr."""
    launcher = ["-c", code] if code else ["-m", "kbmcp"]
    process = processes.run(
        [sys.executable, *launcher, "--db", str(db), "serve"],
        input=b"".join(line if isinstance(line, bytes) else line.encode() for line in lines),
        env=subprocess_env(db, **env),
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=120,
    )
    replies = [json.loads(line) for line in process.stdout.splitlines()]
    by_id: dict[Any, dict[str, Any]] = {}
    for reply in replies:
        assert reply.get("id") not in by_id, f"two replies for one id: {replies}"
        by_id[reply.get("id")] = reply
    return by_id, process.returncode, process.stderr.decode()


def opening() -> list[str]:
    return [rpc_line(1, "initialize", INITIALIZE), rpc_line(None, "notifications/initialized")]


def tool_call(message_id: int, name: str, arguments: dict[str, Any]) -> str:
    return rpc_line(message_id, "tools/call", {"name": name, "arguments": arguments})


def structured(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply
    assert not reply["result"].get("isError"), reply
    return reply["result"]["structuredContent"]


# --------------------------------------------------------------------------- end of stdin


def test_every_request_read_before_the_end_of_stdin_is_answered(corpus_file: Path) -> None:
    """`printf '…search…\\nping\\n' | kbmcp serve` answered the ping and never the search: the
    SDK cancels what is still running when its input ends. A search, a remember and a read
    that takes 2 s are all answered, then the server exits 0."""
    with hash_workspace(corpus_file) as workspace:
        document_id = workspace.conn.execute(
            "SELECT public_id FROM document WHERE path = 'ops/runbook.md'"
        ).fetchone()[0]
    lines = [
        *opening(),
        tool_call(2, "search_knowledge", {"query": "rotate keys"}),
        tool_call(3, "remember", {"content": "The stdio server finishes what it was asked."}),
        tool_call(4, "search_knowledge", {"document_id": document_id, "limit_chars": 50}),
        rpc_line(5, "ping"),
    ]
    started = time.monotonic()
    replies, status, stderr = serve_session(corpus_file, lines, code=SLOW_READS)
    assert status == 0, stderr[-2000:]
    assert sorted(replies) == [1, 2, 3, 4, 5], replies
    assert structured(replies[2])["results"], replies[2]
    assert structured(replies[3])["memory_id"].startswith("mem_")
    assert structured(replies[4])["document_id"] == document_id
    assert replies[5]["result"] == {}
    assert time.monotonic() - started >= 2  # the slow read really was still running at EOF
    assert "Traceback" not in stderr, stderr[-2000:]


def test_a_cancelled_request_is_not_waited_for(corpus_file: Path) -> None:
    """MCP: a request the client cancels is never answered; the end of stdin does not wait for
    it (the server would never exit)."""
    lines = [
        *opening(),
        tool_call(2, "search_knowledge", {"document_id": "doc_" + "1" * 16}),
        rpc_line(None, "notifications/cancelled", {"requestId": 2, "reason": "changed my mind"}),
        rpc_line(3, "ping"),
    ]
    replies, status, stderr = serve_session(corpus_file, lines, code=SLOW_READS)
    assert status == 0, stderr[-2000:]
    assert replies[3]["result"] == {}
    assert set(replies) <= {1, 2, 3}


# --------------------------------------------------------------------------- long lines


def padded_request(message_id: int | None, size: int, *, id_last: bool = False) -> bytes:
    """A ping whose params carry a pad: a line of `size` bytes (with its newline)."""
    pad_key = '"params":{"pad":"'
    head = '{"jsonrpc":"2.0",' + ("" if id_last or message_id is None else f'"id":{message_id},')
    head += '"method":"ping",' + pad_key
    tail = '"}' + (f',"id":{message_id}' if id_last else "") + "}\n"
    return (head + "a" * (size - len(head) - len(tail)) + tail).encode()


def test_a_line_over_the_limit_is_refused_with_its_id(corpus_file: Path) -> None:
    limit = 64 * 1024
    lines: list[str | bytes] = [
        *opening(),
        padded_request(2, limit - 1000),  # under the limit: answered
        padded_request(3, 3 * 1024 * 1024),  # over it: refused, under its id
        padded_request(4, 3 * 1024 * 1024, id_last=True),  # the id is past the start: null
        rpc_line(5, "ping"),  # the next line is read as usual
    ]
    replies, status, stderr = serve_session(
        corpus_file, lines, KBMCP_STDIO_MAX_LINE_BYTES=str(limit)
    )
    assert status == 0, stderr[-2000:]
    assert replies[2]["result"] == {}
    refused = replies[3]["error"]
    assert refused["code"] == -32600
    assert f"over the limit of {limit} bytes (KBMCP_STDIO_MAX_LINE_BYTES)" in refused["message"]
    assert f"is {3 * 1024 * 1024 - 1} bytes long" in refused["message"]
    assert replies[None]["error"]["code"] == -32600  # the line whose id came too late
    assert 4 not in replies
    assert replies[5]["result"] == {}
    logged = [line for line in stderr.splitlines() if "over the limit" in line]
    assert len(logged) == 2 and "Traceback" not in stderr, stderr[-2000:]


def test_a_bad_line_limit_setting_is_one_line(corpus_file: Path) -> None:
    replies, status, stderr = serve_session(
        corpus_file, opening(), KBMCP_STDIO_MAX_LINE_BYTES="lots"
    )
    assert status != 0 and replies == {}
    assert stderr.strip().splitlines() == [
        "error: KBMCP_STDIO_MAX_LINE_BYTES='lots' must be a whole number of bytes >= 1024 "
        f"(default {DEFAULT_MAX_LINE_BYTES})"
    ]


def read_through_a_pipe(data: bytes, limit: int) -> tuple[list[str | LongLine], float]:
    """`read_lines` on a pipe fed `data` by another thread: the lines, and the CPU time of the
    reading thread alone."""
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with open(write_fd, "wb") as pipe:
            pipe.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    started = time.thread_time()
    try:
        lines = list(read_lines(read_fd, limit))
    finally:
        os.close(read_fd)
        writer.join()
    return lines, time.thread_time() - started


def test_reading_a_long_line_takes_linear_time() -> None:
    """The reader joined and split its whole pending buffer again on every 64 KiB read: a 50 MiB
    line cost ~17 s of CPU before the server could read the next line. Now a few hundredths of
    a second, refused or kept."""
    big = 50 * 1024 * 1024
    line = padded_request(7, big)
    lines, refused_cpu = read_through_a_pipe(line + b"tail\n", DEFAULT_MAX_LINE_BYTES)
    assert lines == [LongLine(size=big - 1, limit=DEFAULT_MAX_LINE_BYTES, request_id=7), "tail\n"]
    lines, kept_cpu = read_through_a_pipe(line + b"tail", 64 * 1024 * 1024)
    assert lines == [line.decode(), "tail"]
    assert refused_cpu < 2 and kept_cpu < 2, (refused_cpu, kept_cpu)


def test_lines_are_split_as_before() -> None:
    data = b'{"a": 1}\n\n\xff\xfe broken\nno newline at the end'
    lines, _ = read_through_a_pipe(data, 1024)
    assert lines == ['{"a": 1}\n', "\n", "\ufffd\ufffd broken\n", "no newline at the end"]
    exact = b"x" * 1024 + b"\n" + b"y" * 1025 + b"\nz"
    lines, _ = read_through_a_pipe(exact, 1024)
    assert lines == ["x" * 1024 + "\n", LongLine(1025, 1024, None), "z"]


def test_the_line_limit_setting() -> None:
    assert max_line_bytes_from_env({}) == DEFAULT_MAX_LINE_BYTES == 4 * 1024 * 1024
    assert max_line_bytes_from_env({"KBMCP_STDIO_MAX_LINE_BYTES": " 65536 "}) == 65536
    for bad in ("0", "1023", "-5", "4MiB", "1e6"):
        with pytest.raises(InvalidRequest, match="KBMCP_STDIO_MAX_LINE_BYTES"):
            max_line_bytes_from_env({"KBMCP_STDIO_MAX_LINE_BYTES": bad})


# --------------------------------------------------------------------------- the id of a bad line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"jsonrpc": "2.0", "id": 42, "method": "x"}', 42),
        ('{"id":"abc"}', "abc"),
        ('{"id": "a\\"b\\u00e9"}', 'a"b\u00e9'),
        ('{"jsonrpc":"2.0","method":"m","params":{"id":5,"x":[1,{"id":6}]},"id":-7}', -7),
        ('  {"params": "}{][", "id": 8', 8),  # cut short after the id
        ('{"params": [[[[', None),  # cut short before it
        ('{"id": 1.5}', None),
        ('{"id": 1e3}', None),
        ('{"id": true}', None),
        ('{"id": null}', None),
        ('{"id": "\\ud800"}', None),  # could not be written back
        ('{"method": "x"}', None),
        ("[1, 2]", None),
        ("not json", None),
        ("", None),
    ],
)
def test_top_level_id(text: str, expected: object) -> None:
    assert top_level_id(text) == expected


def test_a_request_nested_too_deeply_gets_its_error_under_its_id(corpus_file: Path) -> None:
    depth = 100_000
    query = "[" * depth + "]" * depth
    deep = (
        '{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_knowledge",'
        f'"arguments":{{"query":{query}}}}}}}\n'
    )
    replies, status, stderr = serve_session(corpus_file, [*opening(), deep, rpc_line(2, "ping")])
    assert status == 0, stderr[-2000:]
    assert replies[42]["error"] == {
        "code": -32700,
        "message": "Parse error: the message is nested too deeply to read",
    }
    assert replies[2]["result"] == {}
    assert "Traceback" not in stderr
