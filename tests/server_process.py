"""kbmcp servers as subprocesses, for tests that need the real process: `kbmcp serve --http` on
any --host, and `kbmcp serve` over stdio driven with raw JSON-RPC lines, each with any launcher
in front (tests/test_long_running.py changes a library constant first; tests/test_read_only.py
serves from inside a private mount namespace), their stderr kept."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests import processes
from tests.mcp_support import REPO_ROOT, HttpServer, rpc_line, subprocess_env
from tests.patience import ceiling

CLI = "from kbmcp.cli import main; main()"


def default_sigint() -> None:
    """`preexec_fn` for a child the test stops with SIGINT. A suite started in the background by
    a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and so would the child:
    Python then installs no KeyboardInterrupt handler and the child never stops."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class HttpProcess(HttpServer):
    """`kbmcp serve --http` on any --host with any serve options, launched by `code` (Python
    source that runs the command line; tests/test_long_running.py changes a library constant
    first) with `env` added to its environment."""

    def __init__(
        self,
        db: Path,
        *serve_args: str,
        host: str = "127.0.0.1",
        code: str = CLI,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(db, *serve_args, host=host, launcher=("-c", code), **(env or {}))


class StdioProcess:
    """`kbmcp serve` over stdio, initialized, driven with raw JSON-RPC lines. `command` is the
    whole command line (by default `python -m kbmcp --db DB serve`)."""

    def __init__(self, db: Path, command: list[str] | None = None) -> None:
        self.process = processes.popen(
            command or [sys.executable, "-c", CLI, "--db", str(db), "serve"],
            env=subprocess_env(db),
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.replies: queue.Queue[str] = queue.Queue()
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.next_id = 1
        initialize = {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
        self.exchange([("initialize", initialize)])
        self._send(rpc_line(None, "notifications/initialized"))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.replies.put(line)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def exchange(
        self, calls: list[tuple[str, dict[str, Any]]], timeout: float = 60
    ) -> list[dict[str, Any]]:
        """Send every call at once, then wait for all replies (each within `timeout` seconds
        on an idle machine: tests/patience.py)."""
        for method, params in calls:
            self._send(rpc_line(self.next_id, method, params))
            self.next_id += 1
        try:
            return [json.loads(self.replies.get(timeout=ceiling(timeout))) for _ in calls]
        except queue.Empty:
            raise AssertionError(f"no reply from the stdio server: {self.stderr}") from None

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured result (an error result is returned as its JSON body)."""
        reply = self.exchange([("tools/call", {"name": name, "arguments": arguments})])[0]
        assert "result" in reply, reply
        result = reply["result"]
        if result.get("isError"):
            return json.loads(result["content"][0]["text"])
        return result["structuredContent"]

    def stop(self) -> None:
        processes.kill_group(self.process)
