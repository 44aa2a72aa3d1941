"""`kbmcp serve --http` as a subprocess on any --host, with any Python launcher in front of the
CLI (tests/test_long_running.py changes a library constant first), and its stderr kept."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.mcp_support import REPO_ROOT, subprocess_env

CLI = "from kbmcp.cli import main; main()"


class HttpProcess:
    def __init__(
        self, db: Path, *serve_args: str, host: str = "127.0.0.1", code: str = CLI
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, "--db", str(db), "serve", "--http", "--host", host,
             "--port", "0", *serve_args],
            env=subprocess_env(db),
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.stderr_lines: list[str] = []
        self._url = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        if not self._url.wait(timeout=60):
            self.stop()
            raise AssertionError(f"the HTTP server did not start: {self.stderr}")
        match = re.search(r"listening on (http://(\S+)/mcp)", self.stderr)
        assert match is not None, self.stderr
        self.url, self.authority = match.group(1), match.group(2)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)
            if "listening on" in line:
                self._url.set()
        self._url.set()  # ended before listening

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        time.sleep(0)  # let the stderr reader see the end
