"""Shared by the MCP tests: a fixed corpus, and kbmcp servers in three forms (in-process, stdio
subprocess, HTTP subprocess) driven through the SDK client.

Ids are deterministic within a file (knowledge base name + relative path + content, keyed with
the file's id key, which KBMCP_TEST_ID_KEY pins for the test suite), and KBMCP_NOW pins every
timestamp, so the same corpus gives the same ids and times in every test and every process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.ids import TEST_KEY_ENV
from kbmcp.server.app import build_server
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.workspace import Workspace
from tests import processes
from tests.id_support import TEST_ID_KEY
from tests.patience import ceiling

REPO_ROOT = Path(__file__).resolve().parent.parent
# Seconds a server may take to start on an idle machine (tests/patience.py scales them).
SERVER_START_SECONDS = 60

RUNBOOK = """\
---
title: Database runbook
tags: [runbook, ops]
owner: infra
---
# Database runbook

How the primary database is operated. Every step below is safe to run during business hours
unless it says otherwise.

## Backups

Backups run nightly at 02:00 UTC with `pg_dump` into the object store. Each backup is checked
by restoring it into a scratch instance; a failed check pages the on-call engineer.

### Restore

To restore, stop the application writers, download the newest verified dump and run
`pg_restore --clean`. Expect about twenty minutes per hundred gigabytes.

## Key rotation

Rotate the database credentials every ninety days. Create the new role first, roll the
application secrets, then drop the old role once no session uses it.
"""

ONCALL_V1 = """\
# On-call

The on-call engineer answers pages within fifteen minutes.
"""

ONCALL_V2 = """\
# On-call

The on-call engineer answers pages within ten minutes, day and night.

## Escalation

If the primary does not acknowledge a page, the secondary is paged after ten minutes.
"""

SEARCH_GUIDE = """\
# Searching well

Scope first, then search, then read. Narrow searches find passages that broad searches rank
too low.
"""

VECTORS = """\
# Vector search notes

Cosine similarity compares the direction of two embeddings. Exact search scans every vector;
an index trades recall for speed.
"""

NOTES = "Plain text notes: remember to renew the TLS certificate before March.\n"

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-02T00:00:00Z"
T2 = "2026-01-03T00:00:00Z"


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@contextlib.contextmanager
def pinned_clock(moment: str) -> Iterator[None]:
    previous = os.environ.get("KBMCP_NOW")
    os.environ["KBMCP_NOW"] = moment
    try:
        yield
    finally:
        if previous is None:
            del os.environ["KBMCP_NOW"]
        else:
            os.environ["KBMCP_NOW"] = previous


def hash_workspace(db_path: Path | str) -> Workspace:
    return Workspace(Settings(db=db_path, embedder="hash"), embedder=HashingEmbedder())


def build_corpus(root: Path, db_path: Path) -> None:
    """Two knowledge bases ingested at three pinned times; ops/oncall.md gets a second revision."""
    handbook = write(
        root / "handbook",
        {
            "ops/runbook.md": RUNBOOK,
            "ops/oncall.md": ONCALL_V1,
            "guides/search.md": SEARCH_GUIDE,
        },
    )
    research = write(root / "research", {"papers/vectors.md": VECTORS, "notes.txt": NOTES})
    with hash_workspace(db_path) as ws:
        principal = ws.local_principal()
        with pinned_clock(T0):
            add_paths(ws, principal, [handbook], IngestOptions(knowledge_base="handbook"))
        with pinned_clock(T1):
            add_paths(ws, principal, [research], IngestOptions(knowledge_base="research"))
        write(handbook, {"ops/oncall.md": ONCALL_V2})
        with pinned_clock(T2):
            add_paths(ws, principal, [handbook], IngestOptions(knowledge_base="handbook"))


# ------------------------------------------------------------------ talking to servers


def subprocess_env(db_path: Path | str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBMCP_")}
    env.update(
        {
            "PYTHONPATH": str(REPO_ROOT),
            "KBMCP_DB": str(db_path),
            "KBMCP_EMBEDDER": "hash",
            "KBMCP_NOW": T2,
            TEST_KEY_ENV: TEST_ID_KEY.hex(),
            **extra,
        }
    )
    return env


def stdio_params(db_path: Path, **extra_env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbmcp", "--db", str(db_path), "serve"],
        env=subprocess_env(db_path, **extra_env),
        cwd=str(REPO_ROOT),
    )


class HttpServer:
    """`kbmcp serve --http --port 0` as a subprocess (in a process group of its own:
    tests/processes.py), started once its stderr says where it listens; its stderr kept.
    `**extra_env` adds to the server's environment; tests/server_process.py HttpProcess
    also chooses the host, the serve options and the launcher."""

    def __init__(
        self,
        db_path: Path | str,
        *serve_args: str,
        host: str = "127.0.0.1",
        launcher: tuple[str, ...] = ("-m", "kbmcp"),
        **extra_env: str,
    ) -> None:
        self.process = processes.popen(
            [sys.executable, *launcher, "--db", str(db_path), "serve", "--http",
             "--host", host, "--port", "0", *serve_args],
            env=subprocess_env(db_path, **extra_env),
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.stderr_lines: list[str] = []
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        # The event, not a time: the "listening on" line (or the end of stderr: it died).
        if not self._listening.wait(timeout=ceiling(SERVER_START_SECONDS)):
            self.stop()
            raise AssertionError(f"the HTTP server did not start: {self.stderr}")
        match = re.search(r"listening on (http://(\S+)/mcp)", self.stderr)
        if match is None:
            self.stop()
            raise AssertionError(f"the HTTP server did not start: {self.stderr}")
        self.url, self.authority = match.group(1), match.group(2)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)
            if "listening on" in line:
                self._listening.set()
        self._listening.set()  # ended before listening

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        """SIGTERM, as a supervisor stops it; SIGKILL to its group if it does not end. Then
        its last lines of stderr are in `stderr_lines`."""
        processes.stop(self.process)
        self._reader.join(timeout=ceiling(10))


@contextlib.asynccontextmanager
async def connect(
    transport: str, db_path: Path | str, http_url: str | None = None
) -> AsyncIterator[Client]:
    """An SDK client connected to kbmcp over `transport`: inprocess, stdio or http. `db_path`:
    a file, or a PostgreSQL URL (in-process)."""
    if transport == "inprocess":
        with hash_workspace(db_path) as ws:
            async with Client(build_server(ws)) as client:
                yield client
    elif transport == "stdio":
        async with Client(stdio_params(db_path)) as client:
            yield client
    elif transport == "http":
        assert http_url is not None
        async with Client(http_url) as client:
            yield client
    else:
        raise ValueError(transport)


def rpc_line(message_id: int | None, method: str, params: dict[str, Any] | None = None) -> str:
    """One JSON-RPC message as a line for a raw stdio or HTTP exchange."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = params
    return json.dumps(message) + "\n"


def sse_events(text: str) -> list[dict[str, str]]:
    """The events of an SSE body: each a dict of its fields (`id`, `data`, `retry`, ...)."""
    events = []
    for block in text.replace("\r\n", "\n").strip().split("\n\n"):
        event: dict[str, str] = {}
        for line in block.splitlines():
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")
        if event:
            events.append(event)
    return events


def payload(result: CallToolResult) -> dict[str, Any]:
    """The JSON a call returned: structuredContent for successes, the error body for errors.
    Also checks that the text block carries exactly the same JSON."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    assert len(texts) == 1, result.content
    body = json.loads(texts[0])
    if result.is_error:
        assert result.structured_content is None
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
        return body
    assert body == result.structured_content
    return body
