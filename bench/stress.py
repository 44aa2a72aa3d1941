"""Stress: an HTTP server, a stdio server and CLI ingests on one file at once, then HTTP scaling.

1. Builds a corpus file (this repository's docs and a generated set of notes, hashing embedder
   so the run measures kbmcp, not the model; `--embedder minilm` for the real one).
2. Starts `kbmcp serve --http` and `kbmcp serve` (stdio) as subprocesses on the file, and for
   `--seconds` runs `--clients` searching clients over HTTP, one over stdio, and `--writers`
   writer processes, each a loop of `kbmcp add` runs (CLI processes) that edit, add and delete
   notes. Every response is checked: a tool error or a transport failure counts as an error.
3. Prints requests served, p50/p95 per transport, the ingest runs, and `PRAGMA
   integrity_check` of the file afterwards.
4. Measures HTTP throughput (requests/s, no writers) with 1 client and with 8.

Whatever happens (a loaded machine, a client that fails to close its session, a server slow to
exit), it ends with `errors: N` (failed calls and ingest runs, a server that did not stop on
SIGTERM or logged a traceback, a phase that could not run) and exit status 0 only when N is 0.
What it could not measure (a percentile from too few samples, a throughput run that failed) is
said on a `not measured: ...` line instead of ending the run.

    python bench/stress.py                      # 60 s, 8 HTTP clients, 2 writers
    python bench/stress.py --seconds 20 --clients 4
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import apsw  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

QUERIES = [
    "how do I limit a search to one document",
    "rotate api keys",
    "what does the ranking statement do",
    "backup the knowledge base file",
    "tokens and shares for another tenant",
    "note about zebra crossings",
    "hybrid alpha weight",
    "read a document window with offset",
]


def env(embedder: str) -> dict[str, str]:
    values = {**os.environ, "KBMCP_EMBEDDER": embedder, "PYTHONPATH": str(REPO_ROOT)}
    values.pop("KBMCP_NOW", None)
    return values


def kbmcp(db: Path, embedder: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), *args],
        env=env(embedder),
        capture_output=True,
        text=True,
        check=False,
    )


def write_notes(folder: Path, count: int, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    words = [
        "zebra",
        "crossing",
        "heron",
        "backup",
        "token",
        "shard",
        "queue",
        "latency",
        "index",
        "vector",
    ]
    for i in range(count):
        body = " ".join(rng.choices(words, k=40))
        (folder / f"note{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n")


# How long a server may take to exit after SIGTERM (it finishes the requests in flight).
STOP_SECONDS = 30
# A 95th percentile from fewer samples than this says nothing.
P95_SAMPLES = 20
# A client whose calls fail this many times in a row stops (its session is gone).
GIVE_UP_FAILURES = 5


class Tally:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = {}
        self.errors: list[str] = []
        self.unmeasured: list[str] = []  # what the run could not measure, and why

    def record(self, transport: str, seconds: float) -> None:
        self.latencies.setdefault(transport, []).append(seconds * 1000)


def describe(error: BaseException) -> str:
    """An exception in one line; an ExceptionGroup by its first inner errors."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions[:3])
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"[:300]


@contextlib.contextmanager
def http_server(db: Path, embedder: str, tally: Tally) -> Iterator[str]:
    """`kbmcp serve --http --port 0` over `db`; yields its URL. Its stderr is drained (a full
    pipe would stall it). A server that does not exit within STOP_SECONDS of SIGTERM is killed
    and, like one that logged a traceback, an error of the run."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "serve", "--http", "--port", "0"],
        env=env(embedder),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log: list[str] = []
    listening = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line)
            if "listening on" in line:
                listening.set()
        listening.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        listening.wait(timeout=120)
        match = re.search(r"listening on (http://\S+)", "".join(log))
        if match is None:
            raise RuntimeError(f"the HTTP server did not start: {''.join(log)[-300:]}")
        yield match.group(1)
    finally:
        stop_server(process, "the HTTP server", tally)
        reader.join(timeout=5)
        tracebacks = "".join(log).count("Traceback")
        if tracebacks:
            tally.errors.append(f"the HTTP server logged {tracebacks} tracebacks")


def stop_server(process: subprocess.Popen[str], name: str, tally: Tally) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            tally.errors.append(f"{name} did not exit within {STOP_SECONDS} s of SIGTERM: killed")
            return
    if process.returncode != 0:
        tally.errors.append(f"{name} exited with status {process.returncode}")


async def search_loop(client: Client, transport: str, until: float, tally: Tally) -> None:
    rng = random.Random(transport)
    failures = 0
    while time.monotonic() < until:
        query = rng.choice(QUERIES)
        started = time.perf_counter()
        try:
            result = await client.call_tool("search_knowledge", {"query": query, "limit": 5})
        except Exception as error:  # a transport failure is an error of the run, not a crash
            tally.errors.append(f"{transport}: {describe(error)}")
            failures += 1
            if failures >= GIVE_UP_FAILURES:  # the session is gone: do not spin on it
                tally.errors.append(f"{transport}: {failures} failures in a row: client stopped")
                return
            continue
        failures = 0
        if result.is_error:
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            tally.errors.append(f"{transport}: {text[:200]}")
        else:
            tally.record(transport, time.perf_counter() - started)


async def client_session(name: str, server: Any, until: float, tally: Tally) -> None:
    """One client searching until `until`. A failure to connect or to close its session is an
    error of the run, with the client's name, never the end of the bench (an ExceptionGroup
    at client shutdown ended it before)."""
    try:
        async with Client(server) as client:
            await search_loop(client, name.split()[0], until, tally)
    except Exception as error:  # (an ExceptionGroup too)
        tally.errors.append(f"{name}: the session failed: {describe(error)}")


async def http_clients(url: str, clients: int, until: float, tally: Tally) -> None:
    await asyncio.gather(
        *(client_session(f"http client {i}", url, until, tally) for i in range(clients))
    )


async def stdio_client(db: Path, embedder: str, until: float, tally: Tally) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbmcp", "--db", str(db), "serve"],
        env=env(embedder),
        cwd=str(REPO_ROOT),
    )
    await client_session("stdio client", params, until, tally)


def writer(db: Path, embedder: str, folder: Path, until: float, seed: int) -> tuple[int, int]:
    """`kbmcp add --prune` runs on a folder whose notes change between runs; (runs, failures)."""
    rng = random.Random(seed)
    runs = failures = 0
    while time.monotonic() < until:
        write_notes(folder, rng.randint(5, 15), rng)
        for stale in sorted(folder.glob("note*.md"))[rng.randint(5, 15) :]:
            stale.unlink()
        done = kbmcp(db, embedder, "add", str(folder), "--kb", folder.name, "--prune")
        runs += 1
        if done.returncode != 0:
            failures += 1
            print(f"writer {seed}: {done.stderr.strip()[:300]}", file=sys.stderr)
    return runs, failures


async def stress(args: argparse.Namespace, db: Path, work: Path, tally: Tally) -> None:
    with http_server(db, args.embedder, tally) as url:
        until = time.monotonic() + args.seconds
        loop = asyncio.get_running_loop()
        writers = [
            loop.run_in_executor(None, writer, db, args.embedder, work / f"writer{i}", until, i)
            for i in range(args.writers)
        ]
        await asyncio.gather(
            http_clients(url, args.clients, until, tally),
            stdio_client(db, args.embedder, until, tally),
        )
        results = await asyncio.gather(*writers, return_exceptions=True)
    runs = failed = 0
    for result in results:
        if isinstance(result, BaseException):
            tally.errors.append(f"a writer loop failed: {describe(result)}")
        else:
            runs, failed = runs + result[0], failed + result[1]
    if failed:
        tally.errors.append(f"{failed} of {runs} ingest runs failed")
    tally.latencies.setdefault("ingest runs", []).extend([0.0] * runs)


async def throughput(db: Path, embedder: str, clients: int, seconds: float, tally: Tally) -> None:
    """HTTP requests per second with `clients` clients and no writers, kept in `tally` as
    `throughput N`; its errors are errors of the run."""
    run = Tally()
    with http_server(db, embedder, run) as url:
        # load the model and the accelerators first
        await client_session("http warm-up", url, time.monotonic() + 1, run)
        await http_clients(url, clients, time.monotonic() + seconds, run)
    tally.errors.extend(f"throughput with {clients} clients: {error}" for error in run.errors)
    served = len(run.latencies.get("http", []))
    if run.errors or not served:
        tally.unmeasured.append(
            f"HTTP throughput with {clients} clients ({served} requests, {len(run.errors)} errors)"
        )
        return
    tally.latencies[f"throughput {clients}"] = [served / seconds]


def latency_line(transport: str, values: list[float]) -> str:
    """p50 and p95 of a transport's latencies, or what so few samples cannot give."""
    if not values:
        return f"  {transport:<6} {0:>6} requests  p50 and p95 not measured: no request completed"
    p50 = f"p50 {statistics.median(values):6.1f} ms"
    if len(values) < P95_SAMPLES:
        p95 = f"p95 not measured ({len(values)} samples, {P95_SAMPLES} needed)"
    else:
        p95 = f"p95 {statistics.quantiles(values, n=20)[18]:6.1f} ms"
    return f"  {transport:<6} {len(values):>6} requests  {p50}  {p95}"


def integrity(db: Path) -> str:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def run(args: argparse.Namespace, work: Path, tally: Tally) -> None:
    """The whole bench; a phase that cannot finish leaves an error in `tally` and the next
    phase runs."""
    db = work / "stress.db"
    built = kbmcp(db, args.embedder, "add", str(REPO_ROOT / "docs"), "--kb", "docs")
    if built.returncode != 0:
        tally.errors.append(f"building the corpus failed: {built.stderr.strip()[-300:]}")
        return
    write_notes(work / "notes", 200, random.Random(0))
    kbmcp(db, args.embedder, "add", str(work / "notes"), "--kb", "notes")
    try:
        asyncio.run(stress(args, db, work, tally))
    except Exception as error:
        tally.errors.append(f"the stress phase stopped: {describe(error)}")
    served = sum(len(tally.latencies.get(transport, [])) for transport in ("http", "stdio"))
    print(f"{args.seconds:g} s: {args.clients} HTTP clients, 1 stdio client, "
          f"{args.writers} writers (CLI ingest loops)")  # fmt: skip
    print(f"requests served: {served}; ingest runs: {len(tally.latencies.get('ingest runs', []))}")
    for transport in ("http", "stdio"):
        print(latency_line(transport, tally.latencies.get(transport, [])))
    check = integrity(db)
    print(f"integrity_check: {check}")
    if check != "ok":
        tally.errors.append(f"integrity_check: {check}")
    for clients in (1, 8):
        try:
            asyncio.run(throughput(db, args.embedder, clients, args.throughput_seconds, tally))
        except Exception as error:
            tally.errors.append(f"throughput with {clients} clients stopped: {describe(error)}")
            tally.unmeasured.append(f"HTTP throughput with {clients} clients")
    one, eight = tally.latencies.get("throughput 1"), tally.latencies.get("throughput 8")
    if one and eight:
        print(f"HTTP throughput: 1 client {one[0]:.0f} req/s, 8 clients {eight[0]:.0f} req/s "
              f"({eight[0] / one[0]:.2f}x)")  # fmt: skip


def verdict(tally: Tally) -> int:
    """The last lines of every run; its exit status."""
    for what in tally.unmeasured:
        print(f"not measured: {what}")
    print(f"errors: {len(tally.errors)}")
    for error in tally.errors[:10]:
        print(f"  {error}")
    return 1 if tally.errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8, help="searching HTTP clients")
    parser.add_argument("--writers", type=int, default=2, help="CLI ingest loops")
    parser.add_argument("--embedder", default="hash", choices=["hash", "minilm"])
    parser.add_argument("--throughput-seconds", type=float, default=15.0)
    args = parser.parse_args(argv)
    tally = Tally()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run(args, Path(tmp), tally)
    except KeyboardInterrupt:
        tally.errors.append("interrupted (Ctrl-C): the run is incomplete")
        verdict(tally)
        return 130
    except Exception as error:  # a phase that failed outside its own guard
        tally.errors.append(f"the bench stopped: {describe(error)}")
    return verdict(tally)


if __name__ == "__main__":
    sys.exit(main())
