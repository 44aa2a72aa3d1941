"""HTTP clients that stall or hang up while sending a body (issue 33, item 5): a body that does
not arrive is answered 408 after KBMCP_HTTP_BODY_TIMEOUT_SECONDS (50 connections with half a
body each stayed open for ever), and a client that disconnects mid-body is one log line, not an
ERROR with a traceback. Transport behaviour, before any request reaches the store: the corpus
file only."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from kbmcp.errors import InvalidRequest
from kbmcp.server.http_body import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    body_timeout_from_env,
)
from tests.patience import ceiling
from tests.server_process import HttpProcess

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "stalling", "version": "0"},
    },
}


def half_a_request(authority: str) -> socket.socket:
    """A connection that sends the headers of a POST and the first half of its body, then
    nothing more."""
    host, _, port = authority.rpartition(":")
    connection = socket.create_connection((host.strip("[]"), int(port)), timeout=ceiling(60))
    body = json.dumps(INITIALIZE).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    connection.sendall(head + body[: len(body) // 2])
    return connection


def answers(connections: list[socket.socket], seconds: float) -> list[bytes]:
    """What each connection receives within `seconds` (b"" for a closed connection, None
    for nothing at all)."""
    got: list[bytes | None] = [None] * len(connections)

    def read(index: int) -> None:
        connections[index].settimeout(seconds)
        chunks = []
        try:
            while chunk := connections[index].recv(65536):
                chunks.append(chunk)
        except OSError:  # (the time-out: nothing more, or nothing at all)
            pass
        got[index] = b"".join(chunks) if chunks else got[index]

    readers = [threading.Thread(target=read, args=(i,)) for i in range(len(connections))]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    return got  # type: ignore[return-value]


def test_a_body_that_does_not_arrive_is_answered_408(corpus_file: Path) -> None:
    server = HttpProcess(corpus_file, env={"KBMCP_HTTP_BODY_TIMEOUT_SECONDS": "1"})
    stalled: list[socket.socket] = []
    try:
        stalled = [half_a_request(server.authority) for _ in range(50)]
        started = time.monotonic()
        replies = answers(stalled, seconds=ceiling(20))
        waited = time.monotonic() - started
        assert all(reply is not None for reply in replies), "connections left hanging"
        for reply in replies:
            assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
            body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
            assert body["error"]["code"] == -32600
            assert "request body timed out" in body["error"]["message"]
        assert waited < ceiling(15), waited
        # the server goes on serving, and stops at once on SIGTERM
        fresh = half_a_request(server.authority)
        fresh.sendall(json.dumps(INITIALIZE).encode()[len(json.dumps(INITIALIZE)) // 2 :])
        assert answers([fresh], seconds=ceiling(20))[0].startswith(b"HTTP/1.1 200 ")
        fresh.close()
    finally:
        for connection in stalled:
            connection.close()
        stopped = time.monotonic()
        server.stop()
    assert server.process.returncode == 0 and time.monotonic() - stopped < ceiling(8)
    timed_out = [line for line in server.stderr_lines if "did not send its request body" in line]
    assert len(timed_out) == 50, server.stderr[-3000:]
    assert "within 1 s" in timed_out[0] and "KBMCP_HTTP_BODY_TIMEOUT_SECONDS" in timed_out[0]
    assert "Traceback" not in server.stderr and " ERROR " not in server.stderr, server.stderr


def test_a_client_that_hangs_up_mid_body_is_one_line(corpus_file: Path) -> None:
    server = HttpProcess(corpus_file)
    try:
        leaving = [half_a_request(server.authority) for _ in range(5)]
        time.sleep(0.5)  # the server is reading their bodies
        for connection in leaving:
            connection.shutdown(socket.SHUT_RDWR)
            connection.close()
        deadline = time.monotonic() + ceiling(20)
        while time.monotonic() < deadline and server.stderr.count("disconnected before") < 5:
            time.sleep(0.05)
    finally:
        server.stop()
    lines = [line for line in server.stderr_lines if "disconnected before its request" in line]
    assert len(lines) == 5, server.stderr[-3000:]
    assert " WARNING " in lines[0] and "POST /mcp from 127.0.0.1:" in lines[0]
    assert "Traceback" not in server.stderr and " ERROR " not in server.stderr, server.stderr


def test_the_body_timeout_setting() -> None:
    assert body_timeout_from_env({}) == DEFAULT_BODY_TIMEOUT_SECONDS == 30
    assert body_timeout_from_env({"KBMCP_HTTP_BODY_TIMEOUT_SECONDS": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(InvalidRequest, match="KBMCP_HTTP_BODY_TIMEOUT_SECONDS"):
            body_timeout_from_env({"KBMCP_HTTP_BODY_TIMEOUT_SECONDS": bad})
