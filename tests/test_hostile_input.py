"""Hostile and malformed input at the transports and the CLI (issue 11, item 4): every line on
stdio gets an answer, every JSON-RPC error has a valid code, the HTTP body is bounded, a port in
use is one line, command-line text must be UTF-8 and numbers are checked.

The transport tests run once, on the corpus file: a malformed line, a bad id, an oversized body,
a port in use or undecodable argument bytes are dealt with before any request reaches the
store, so the backend behind it changes nothing. The in-process CLI checks run on both backends.
Tests that send bad lines and check the answers share one raw stdio server (`shared_stdio`):
each reads the log lines its own input caused (`log_until_now`), and the server must still exit
cleanly at EOF after all of them."""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from kbmcp.server.errors import RequestErrorGuard
from kbmcp.server.scope_guard import TOOL_SCOPES
from tests import processes
from tests.cli_support import assert_one_line_error
from tests.mcp_support import REPO_ROOT, HttpServer, connect, rpc_line, subprocess_env
from tests.patience import ceiling

JSONRPC_CODES = {-32700, -32600, -32601, -32602, -32603}


class RawStdio:
    """`kbmcp serve` over stdio driven line by line, stdin kept open (at EOF the server stops
    and drops what is still running)."""

    def __init__(self, db: Path) -> None:
        self.process = processes.popen(
            [sys.executable, "-m", "kbmcp", "--db", str(db), "serve"],
            env=subprocess_env(db),
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.capabilities: dict[str, Any] = {}
        self.markers = 0
        threading.Thread(target=self._read, daemon=True).start()

        self.stderr_lines: list[str] = []
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    def log_mark(self) -> int:
        """Where the log stands now: `log_since(mark)` is what was logged after it."""
        return len(self.stderr_lines)

    def log_since(self, mark: int) -> str:
        return "".join(self.stderr_lines[mark:])

    def wait_for_log(self, fragment: str, mark: int, timeout: float = 30) -> str:
        """The log since `mark` once it holds `fragment` (stderr is read by its own thread,
        so a line the server wrote before its last reply may still be on its way)."""
        deadline = time.monotonic() + ceiling(timeout)
        while fragment not in self.log_since(mark) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.log_since(mark)

    def log_until_now(self, mark: int) -> str:
        """Everything logged since `mark` up to this moment, complete: a request with an
        invalid id is logged before its reply, and stderr keeps the server's order, so once
        that line (unique to this call) has been read, so has every line logged before it."""
        self.markers += 1
        marker = json.dumps([f"log-marker-{self.markers}"])
        reply = self.reply(f'{{"jsonrpc": "2.0", "id": {marker}, "method": "ping"}}')
        assert reply["error"]["code"] == -32600, reply
        logged = self.wait_for_log(f"request with an invalid id on stdin: {marker}", mark)
        head, found, _ = logged.partition(f"request with an invalid id on stdin: {marker}")
        assert found, logged[-2000:]
        return head.rsplit("\n", 1)[0] + "\n" if "\n" in head else ""

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line if line.endswith("\n") else line + "\n")
        self.process.stdin.flush()

    def reply(self, line: str, timeout: float = 30) -> dict[str, Any]:
        self.send(line)
        return json.loads(self.lines.get(timeout=ceiling(timeout)))

    def close(self) -> str:
        """Close stdin (the server stops at EOF) and return everything it logged."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=ceiling(30))
        self._stderr_reader.join(timeout=ceiling(10))
        return "".join(self.stderr_lines)

    def initialize(self) -> None:
        initialize = {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
        self.capabilities = self.reply(rpc_line(1, "initialize", initialize))["result"][
            "capabilities"
        ]
        self.send(rpc_line(None, "notifications/initialized"))

    def kill(self) -> None:
        processes.kill_group(self.process)


@pytest.fixture(scope="module")
def shared_stdio(corpus_file: Path) -> Iterator[RawStdio]:
    """One server for the module's bad-line tests (starting `kbmcp serve` costs more than any
    of them). After all their input it must still exit cleanly at EOF, with no traceback."""
    server = RawStdio(corpus_file)
    try:
        server.initialize()
        yield server
        stderr = server.close()
        assert server.process.returncode == 0, stderr[-2000:]
        assert "Traceback" not in stderr, stderr[-2000:]
    finally:
        server.kill()


@pytest.fixture(scope="module")
def http_server(corpus_file: Path) -> Iterator[HttpServer]:
    """`kbmcp serve --http` on the corpus file (the transport tests run once: see above)."""
    server = HttpServer(corpus_file)
    try:
        yield server
    finally:
        server.stop()


UNPARSEABLE = [
    ("{not json", None, -32700, "not valid JSON"),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"', None, -32700, "not valid JSON"),
    ('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"search_knowledge",'
     '"arguments":{"query":"\\ud800"}}}', 8, -32700, "lone surrogate"),
    ('{"jsonrpc":"2.0","id":"\\udfff","method":"ping"}', None, -32700, "lone surrogate"),
    ('{"foo": 1}', None, -32600, "not a JSON-RPC 2.0"),
    ('{"jsonrpc": "2.0", "id": 9}', 9, -32600, "not a JSON-RPC 2.0"),
    ("[1, 2, 3]", None, -32600, "not a JSON-RPC 2.0"),
    ('"just a string"', None, -32600, "not a JSON-RPC 2.0"),
]  # fmt: skip


def test_stdio_answers_unparseable_lines_and_keeps_serving(shared_stdio: RawStdio) -> None:
    mark = shared_stdio.log_mark()
    for line, request_id, code, fragment in UNPARSEABLE:
        reply = shared_stdio.reply(line)
        assert reply["jsonrpc"] == "2.0" and reply["id"] == request_id, line
        assert reply["error"]["code"] == code and fragment in reply["error"]["message"], line
        listed = shared_stdio.reply(rpc_line(2, "tools/list"))  # still serving
        assert len(listed["result"]["tools"]) == len(TOOL_SCOPES)
    logged = shared_stdio.log_until_now(mark)  # the clean exit at EOF: `shared_stdio`
    assert "unparseable message on stdin" in logged and "Traceback" not in logged


INVALID_IDS = ["null", "1.5", "2.0", "true", "[1]", '{"a": 1}']


@pytest.mark.parametrize("request_id", INVALID_IDS)
def test_stdio_answers_a_request_with_an_invalid_id(
    shared_stdio: RawStdio, request_id: str
) -> None:
    """MCP ids are strings or integers: the SDK took these for notifications and never
    answered, leaving the client waiting for its time-out."""
    mark = shared_stdio.log_mark()
    reply = shared_stdio.reply(f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "ping"}}')
    assert reply["id"] is None and reply["error"]["code"] == -32600, reply
    assert "the id must be a string or an integer" in reply["error"]["message"]
    assert shared_stdio.reply(rpc_line(2, "ping")) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    logged = shared_stdio.wait_for_log("request with an invalid id on stdin", mark)
    assert "request with an invalid id on stdin" in logged and "Traceback" not in logged


def test_stdio_deeply_nested_json_is_one_log_line(shared_stdio: RawStdio) -> None:
    depth = 100_000
    mark = shared_stdio.log_mark()
    reply = shared_stdio.reply("[" * depth + "]" * depth)
    assert reply["error"] == {
        "code": -32700,
        "message": "Parse error: the message is nested too deeply to read",
    }
    assert shared_stdio.reply(rpc_line(2, "ping"))["result"] == {}
    logged = shared_stdio.log_until_now(mark)  # the clean exit at EOF: `shared_stdio`
    assert "Traceback" not in logged and "RecursionError" not in logged, logged[-2000:]
    assert len([line for line in logged.splitlines() if "kbmcp" in line]) == 1, logged[-2000:]


def test_stdio_stops_at_once_when_the_client_closes_stdout(corpus_file: Path) -> None:
    """Nothing can reach the client any more: the server exits cleanly now, not when stdin
    closes (before: it ran on, then ended with "unexpected ExceptionGroup")."""
    process = processes.popen(
        [sys.executable, "-m", "kbmcp", "--db", str(corpus_file), "serve"],
        env=subprocess_env(corpus_file),
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    # A server that never answers fails the test (the pipe is closed below, so it is read here,
    # not by a thread).
    watchdog = threading.Timer(ceiling(60), processes.kill_group, [process])
    watchdog.start()
    try:
        initialize = {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
        process.stdin.write(rpc_line(1, "initialize", initialize))
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1
        process.stdout.close()  # the client stops reading; stdin stays open
        # stdin never closes here, so a server that waits for it never exits: the timeout only
        # leaves room for a loaded machine (it took 6 s once while the suite ran beside a soak).
        assert process.wait(timeout=ceiling(30)) == 0
        _, stderr = process.communicate(timeout=ceiling(10))
        assert "Traceback" not in stderr and "unexpected" not in stderr, stderr
    finally:
        watchdog.cancel()
        processes.stop(process)


def test_stdio_errors_for_other_methods_have_valid_codes(shared_stdio: RawStdio) -> None:
    cases = [
        (rpc_line(3, "prompts/get", {"name": "no-such-prompt"}), -32602),
        (rpc_line(4, "resources/read", {"uri": "file:///etc/passwd"}), -32602),
        (rpc_line(5, "no/such/method"), -32601),
        (
            rpc_line(6, "tools/call", {"name": "search_knowledge", "arguments": "not an object"}),
            -32602,
        ),
        (rpc_line(7, "logging/setLevel", {"level": "loudest"}), -32602),
        # An unknown tool is a JSON-RPC error, as the MCP specification says, not a tool result.
        (rpc_line(8, "tools/call", {"name": "delete_everything", "arguments": {}}), -32602),
    ]
    mark = shared_stdio.log_mark()
    for line, code in cases:
        reply = shared_stdio.reply(line)
        assert reply["error"]["code"] == code, reply
    assert shared_stdio.reply(rpc_line(9, "ping"))["result"] == {}  # still serving
    assert "Traceback" not in shared_stdio.log_since(mark)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_unknown_prompt_is_invalid_params(
    transport: str, corpus_file: Path, http_server: HttpServer
) -> None:
    async with connect(transport, corpus_file, http_server.url) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("no-such-prompt")
        assert caught.value.error.code == -32602  # was 0, not a JSON-RPC code
        assert "no-such-prompt" in caught.value.error.message


def test_only_served_capabilities_are_declared(shared_stdio: RawStdio) -> None:
    """A 2025 client over stdio: no logging (kbmcp sends no log notifications, so setLevel is
    not served), nothing to subscribe to; completions are answered (with nothing)."""
    raw_stdio = shared_stdio
    capabilities = raw_stdio.capabilities
    assert set(capabilities) == {"completions", "tools", "prompts", "resources"}
    assert capabilities["resources"] == {"subscribe": False, "listChanged": False}
    assert capabilities["tools"] == capabilities["prompts"] == {"listChanged": False}
    assert raw_stdio.reply(rpc_line(3, "logging/setLevel", {"level": "info"}))["error"]["code"] == (
        -32601
    )
    completion = raw_stdio.reply(rpc_line(4, "completion/complete", {
        "ref": {"type": "ref/prompt", "name": "anything"},
        "argument": {"name": "arg", "value": "x"}}))  # fmt: skip
    assert completion["result"]["completion"]["values"] == []


HTTP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.mark.anyio
async def test_http_refuses_an_oversized_body_before_reading_it(http_server: HttpServer) -> None:
    huge = rpc_line(1, "tools/call", {"name": "search_knowledge",
                                 "arguments": {"query": "x" * (3 * 1024 * 1024)}})  # fmt: skip
    async with httpx2.AsyncClient(timeout=ceiling(30)) as http:
        response = await http.post(http_server.url, headers=HTTP_HEADERS, content=huge)
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["code"] == -32600
        assert "request body too large" in error["message"] and "2097152" in error["message"]
        assert len(response.content) < 1000  # the body is not echoed
    async with connect("http", Path(), http_server.url) as client:  # still serving
        assert len((await client.list_tools()).tools) == len(TOOL_SCOPES)


@pytest.mark.anyio
async def test_http_answers_bad_json_with_a_parse_error(http_server: HttpServer) -> None:
    async with httpx2.AsyncClient(timeout=ceiling(30)) as http:
        response = await http.post(http_server.url, headers=HTTP_HEADERS, content="{not json")
    assert response.json()["error"]["code"] == -32700
    lone_surrogate = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}'
    async with httpx2.AsyncClient(timeout=ceiling(30)) as http:
        response = await http.post(http_server.url, headers=HTTP_HEADERS, content=lone_surrogate)
    assert response.json()["error"]["code"] == -32700


def test_port_in_use_is_one_line(corpus_file: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = processes.run(
            [sys.executable, "-m", "kbmcp", "--db", str(corpus_file), "serve", "--http",
             "--port", str(port)],
            env=subprocess_env(corpus_file), cwd=REPO_ROOT, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
    assert run.returncode == 1
    errors = [line for line in run.stderr.splitlines() if " kbmcp WARNING " not in line]
    assert errors == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(is another kbmcp serve running? choose another --port)"
    ], run.stderr  # log lines (such as the no-tokens warning) aside, one line


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        (["search", "ab\udcff\udcfe"], ["'QUERY'", "not valid UTF-8", "byte 0xff at character 3"]),
        (["search", "ok", "--path", "\udc80"], ["'--path'", "byte 0x80"]),
        (["search", "ok", "--kb", "\ud800"], ["'--kb'", "U+D800"]),
    ],
)
def test_cli_text_must_be_utf8(kbmcp, corpus_db: Path, arguments, fragments) -> None:
    assert_one_line_error(kbmcp("--db", corpus_db, *arguments), *fragments)


def test_cli_non_utf8_query_bytes_from_a_real_terminal(corpus_file: Path) -> None:
    """The bytes as a shell passes them (the minilm tokenizer used to fail with TypeError)."""
    run = processes.run(
        [sys.executable.encode(), b"-m", b"kbmcp", b"--db", str(corpus_file).encode(), b"search",
         b"caf\xe9"],
        env=subprocess_env(corpus_file, KBMCP_EMBEDDER="minilm"), cwd=REPO_ROOT,
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert b"not valid UTF-8 text (byte 0xe9 at character 4)" in run.stderr
    assert b"TypeError" not in run.stderr


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["search", "q", "--limit", "-5"], "limit"),
        (["search", "q", "--limit", "ten"], "'--limit'"),
        (["search", "q", "--alpha", "nan"], "alpha"),
        (["search", "q", "--alpha", "1.5"], "alpha"),
        (["search", "q", "--rrf-k", "0", "--mode", "rrf"], "'--rrf-k'"),
        (["search", "q", "--rrf-k", str(2**63)], "'--rrf-k'"),
        (["search", "q", "--rrf-k", "10001"], "'--rrf-k'"),
        (["eval", "nowhere", "--rrf-k", str(2**63)], "'--rrf-k'"),
        (["search", "q", "--min-similarity", "inf"], "--min-similarity"),
        (["read", "doc_0123456789abcdef", "--offset", "-1"], "'--offset'"),
        (["read", "doc_0123456789abcdef", "--limit-chars", "0"], "'--limit-chars'"),
        (["ls", "--limit", "100000"], "'--limit'"),
        (["serve", "--http", "--port", "70000"], "'--port'"),
    ],
)
def test_cli_numbers_are_checked(kbmcp, corpus_db: Path, arguments, fragment: str) -> None:
    assert_one_line_error(kbmcp("--db", corpus_db, *arguments), fragment)


@pytest.mark.parametrize("value", [str(2**63), "10001", "0"])
def test_rrf_k_setting_is_bounded(
    kbmcp, corpus_db: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """A KBMCP_RRF_K past the bound is a one-line error naming the setting, before any search
    (2^63 used to reach SQLite and come back as an internal error)."""
    monkeypatch.setenv("KBMCP_RRF_K", value)
    assert_one_line_error(kbmcp("--db", corpus_db, "search", "q", "--mode", "rrf"), "KBMCP_RRF_K")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "raised", "code"),
    [
        ("prompts/get", ValueError("Unknown prompt: x"), -32602),
        ("resources/read", ValueError("Unknown resource: x"), -32602),
        ("tools/list", ValueError("a bug"), -32603),
        ("prompts/list", RuntimeError("a bug"), -32603),
    ],
)
async def test_request_errors_get_valid_codes(method: str, raised: Exception, code: int) -> None:
    """The guard's mapping, for failures no real request triggers today (a crash in a handler)."""

    async def failing(ctx: object) -> None:
        raise raised

    with pytest.raises(MCPError) as caught:
        await RequestErrorGuard()(SimpleNamespace(method=method), failing)  # type: ignore[arg-type]
    assert caught.value.error.code == code
    message = caught.value.error.message
    if code == -32602:
        assert message == str(raised)  # names the unknown prompt or resource
    else:
        assert "a bug" not in message and "see the server log" in message


def test_cli_search_escapes_control_characters_in_titles(kbmcp, tmp_path: Path) -> None:
    """An OSC sequence in a title would retitle the terminal, a CSI one clear it: `search`
    prints them escaped, as `ls` does (the JSON output keeps the exact text)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    title = "Herons\x1b]0;pwned\x07 and \x1b[2J kestrels"
    (folder / "birds.md").write_text(f"---\ntitle: {json.dumps(title)}\n---\nHerons wade.\n")
    db = tmp_path / "kb.db"
    assert kbmcp("--db", db, "add", folder).code == 0
    found = kbmcp("--db", db, "search", "herons")
    assert found.code == 0, found.err
    assert "\x1b" not in found.out and "\x07" not in found.out
    assert "Herons\\x1b]0;pwned\\x07 and \\x1b[2J kestrels" in found.out
    as_json = kbmcp("--db", db, "search", "herons", "--json").json()
    assert as_json["results"][0]["title"] == title
