"""Soak: both servers living the way they do in use, for as long as you like (issue 20).

On one file, for `--minutes`:
- `kbmcp serve` (stdio) and `kbmcp serve --http` (subprocesses) get bursts of concurrent
  searches separated by idle gaps longer than the servers' worker-thread expiry (10 s), with a
  `remember` in every stdio burst and an abandoned HTTP session (initialize, never DELETE) in
  every HTTP burst: the shape of desktop agents, the one that leaked connections;
- `--searchers` HTTP clients search without pause, so readers overlap the writers all along;
- an ingest loop edits, adds and deletes notes and runs `kbmcp add --prune` (CLI processes);
- halfway, `kbmcp reembed` re-embeds every chunk while all of the above goes on.
Every `--sample-seconds` it records each server's open descriptors and RSS and the sizes of the
file and its WAL. At the end it stops both servers with SIGTERM, checks they exit 0 and leave
no WAL, runs `PRAGMA integrity_check`, prints the samples and a summary table (Markdown, ready
for docs/operations.md) and exits 1 if a bound is broken:
- 0 errors (a failed call, a reply slower than REPLY_SECONDS, a failed `add` or `reembed`, an
  error logged by a server, a server not exiting 0 within 60 s of SIGTERM);
- descriptors on the file (the file and its -wal per connection, one -shm) never above
  2 x (2 x N + 1) + 1, N being the most requests the run keeps in flight on that server: one
  connection per request in flight, as many again for worker threads told to stop but not yet
  ended (a burst may start before the threads it replaces have ended) and the server's first
  connection. The leak this guards against (one connection per expired worker thread) passes
  it within three bursts. The server's other descriptors (pipes, sockets) never more than
  2 x N above what it had when it started;
- private memory (RssAnon) never more than --rss-growth-mib above the first sample after
  --warm-up-seconds (model loaded, caches filled, the session table at its steady size). RSS
  is reported too, but it also counts the pages of the database file each connection has
  mapped (SQLite's mmap; RssFile): shared with the page cache, reclaimable, and growing with
  the file (which the ingest loop grows: every edit keeps the old revision's chunks);
- the WAL never above --wal-limit-mib;
- nothing left beside the file after SIGTERM, and integrity_check "ok".

    python bench/soak.py --minutes 5
    python bench/soak.py --minutes 30 --embedder minilm     # the release run
"""

from __future__ import annotations

import argparse
import faulthandler
import itertools
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import httpx2

REPO_ROOT = Path(__file__).resolve().parent.parent
QUERIES = [
    "how do I limit a search to one document",
    "rotate api keys",
    "backup the knowledge base file",
    "what happens when the disk is full",
    "heron latency shard",
    "tokens and shares for another tenant",
    "read a document window with offset",
    "zebra crossing queue",
]
WORDS = [
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
    "kestrel",
]
VERSION = "2025-06-18"
REPLY_SECONDS = 60.0  # a reply slower than this is an error of the run
INITIALIZE = {
    "protocolVersion": VERSION,
    "capabilities": {},
    "clientInfo": {"name": "soak", "version": "0"},
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def environment(embedder: str) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("KBMCP_")}
    values.update({"KBMCP_EMBEDDER": embedder, "PYTHONPATH": str(REPO_ROOT)})
    return values


def kbmcp(db: Path, embedder: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), *args],
        env=environment(embedder),
        capture_output=True,
        text=True,
        check=False,
    )


def rpc(message_id: int | None, method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = params
    return json.dumps(message)


def search_call(rng: random.Random) -> dict[str, Any]:
    return {"name": "search_knowledge", "arguments": {"query": rng.choice(QUERIES), "limit": 5}}


# ----------------------------------------------------------------------------- bookkeeping


@dataclass
class Tally:
    """What the run did and what went wrong, shared by every thread."""

    requests: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    ingests: int = 0
    reembed: str = "not run"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def served(self, what: str, count: int = 1) -> None:
        with self.lock:
            self.requests[what] = self.requests.get(what, 0) + count

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)
        print(f"ERROR {message}", file=sys.stderr, flush=True)


@dataclass
class Soak:
    """What every loop of the run shares."""

    db: Path
    notes: Path
    args: argparse.Namespace
    stop: threading.Event = field(default_factory=threading.Event)
    tally: Tally = field(default_factory=Tally)

    def in_flight(self, server: str) -> int:
        """The most requests the run has in flight at once on `server` ("stdio" or "http")."""
        if server == "stdio":
            return self.args.burst + 1  # the burst and its remember
        return self.args.burst + self.args.searchers  # a burst while every searcher waits


def descriptor_limits(soak: Soak, server: str, first: Sample) -> tuple[int, int]:
    """The bounds on the server's descriptors on the file, and on its other descriptors (see
    the module's docstring). `first`: the sample taken before any request."""
    in_flight = soak.in_flight(server)
    others_at_start = getattr(first, f"{server}_fds") - getattr(first, f"{server}_db_fds")
    return 2 * (2 * in_flight + 1) + 1, others_at_start + 2 * in_flight


@dataclass
class Sample:
    seconds: float
    stdio_fds: int
    http_fds: int
    stdio_db_fds: int  # of those, open on the file, its -wal or -shm
    http_db_fds: int
    stdio_rss: float
    http_rss: float
    stdio_anon: float  # of the RSS, private memory (RssAnon; the rest is mapped files)
    http_anon: float
    db_mib: float
    wal_mib: float
    requests: int
    errors: int


def descriptors(pid: int, prefix: str = "") -> int:
    """The process's open descriptors (those pointing at a path starting with `prefix`)."""
    count = 0
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return -1
    for entry in entries:
        try:
            if os.readlink(f"/proc/{pid}/fd/{entry}").startswith(prefix):
                count += 1
        except OSError:
            continue
    return count


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory (`VmRSS`), or one of its parts (`RssAnon`, `RssFile`)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return -1.0


def size_mib(path: Path) -> float:
    try:
        return path.stat().st_size / (1 << 20)
    except OSError:
        return 0.0


# ----------------------------------------------------------------------------- servers


class StdioServer:
    """`kbmcp serve` driven with raw JSON-RPC lines."""

    def __init__(self, db: Path, embedder: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kbmcp", "--db", str(db), "serve"],
            env=environment(embedder),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.replies: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(
            target=self._pump, args=(self.process.stdout, self.replies.put), daemon=True
        ).start()
        threading.Thread(
            target=self._pump, args=(self.process.stderr, self.stderr.append), daemon=True
        ).start()
        self.next_id = 1
        self.exchange([("initialize", INITIALIZE)], timeout=300)
        self._send(rpc(None, "notifications/initialized"))

    @staticmethod
    def _pump(stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line)

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def exchange(
        self, calls: list[tuple[str, dict[str, Any]]], timeout: float = 120
    ) -> list[dict[str, Any]]:
        for method, params in calls:
            self._send(rpc(self.next_id, method, params))
            self.next_id += 1
        return [json.loads(self.replies.get(timeout=timeout)) for _ in calls]


class HttpServer:
    def __init__(self, db: Path, embedder: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kbmcp", "--db", str(db), "serve", "--http", "--port", "0"],
            env=environment(embedder),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        assert self.process.stderr is not None
        deadline = time.monotonic() + 300
        self.url = ""
        while not self.url and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                raise SystemExit(f"the HTTP server exited: {''.join(self.stderr)}")
            self.stderr.append(line)
            match = re.search(r"listening on (http://\S+/mcp)", line)
            self.url = match.group(1) if match else ""
        if not self.url:
            raise SystemExit("the HTTP server did not start")
        threading.Thread(
            target=lambda: self.stderr.extend(self.process.stderr or []), daemon=True
        ).start()


class HttpSession:
    """One MCP session over raw HTTP (JSON-RPC in, SSE or JSON out)."""

    def __init__(self, http: httpx2.Client, url: str) -> None:
        self.http, self.url = http, url
        self.ids = itertools.count(2)  # unique per session: concurrent calls are told apart
        opened = http.post(url, headers=MCP_HEADERS, content=rpc(1, "initialize", INITIALIZE))
        opened.raise_for_status()
        self.headers = {
            **MCP_HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": VERSION,
        }
        self.post(rpc(None, "notifications/initialized"))

    def post(self, body: str) -> httpx2.Response:
        return self.http.post(self.url, headers=self.headers, content=body, timeout=REPLY_SECONDS)

    def call_tool(self, call: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC reply to `tools/call` with `call` ({"name", "arguments"})."""
        response = self.post(rpc(next(self.ids), "tools/call", call))
        response.raise_for_status()
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            text = next(d for d in reversed(data) if d)
        return json.loads(text)


def tool_error(reply: dict[str, Any]) -> str | None:
    if "error" in reply:
        return json.dumps(reply["error"])[:300]
    if reply.get("result", {}).get("isError"):
        return str(reply["result"]["content"][0]["text"])[:300]
    return None


# ----------------------------------------------------------------------------- the loops


def stdio_bursts(soak: Soak, server: StdioServer) -> None:
    args, stop, tally = soak.args, soak.stop, soak.tally
    rng = random.Random(1)
    while not stop.is_set():
        fact = f"soak fact {rng.random():.6f}: the heron rotates keys on Mondays"
        calls = [("tools/call", search_call(rng)) for _ in range(args.burst)]
        calls.append(("tools/call", {"name": "remember", "arguments": {"content": fact}}))
        try:
            replies = server.exchange(calls)
        except queue.Empty:
            tally.error("stdio: no reply within 120 s")
            return
        for reply in replies:
            problem = tool_error(reply)
            if problem:
                tally.error(f"stdio: {problem}")
        tally.served("stdio", len(replies))
        stop.wait(rng.uniform(args.gap_seconds, args.gap_seconds + 3))


def http_bursts(soak: Soak, url: str) -> None:
    args, stop, tally = soak.args, soak.stop, soak.tally
    rng = random.Random(2)
    with httpx2.Client() as http, ThreadPoolExecutor(args.burst) as pool:
        session = HttpSession(http, url)
        while not stop.is_set():
            calls = [search_call(rng) for _ in range(args.burst)]
            try:
                replies = list(pool.map(session.call_tool, calls))
                HttpSession(http, url)  # opened and abandoned (never DELETEd)
            except Exception as exc:  # a transport failure is an error of the run
                tally.error(f"http burst: {type(exc).__name__}: {exc}")
                session = HttpSession(http, url)
                continue
            for reply in replies:
                problem = tool_error(reply)
                if problem:
                    tally.error(f"http: {problem}")
            tally.served("http", len(replies) + 1)
            stop.wait(rng.uniform(args.gap_seconds, args.gap_seconds + 3))


def http_searcher(soak: Soak, url: str, seed: int) -> None:
    stop, tally = soak.stop, soak.tally
    rng = random.Random(100 + seed)
    with httpx2.Client() as http:
        session = HttpSession(http, url)
        while not stop.is_set():
            try:
                problem = tool_error(session.call_tool(search_call(rng)))
            except Exception as exc:
                tally.error(f"http searcher: {type(exc).__name__}: {exc}")
                time.sleep(1)
                session = HttpSession(http, url)
                continue
            if problem:
                tally.error(f"http searcher: {problem}")
            tally.served("http (continuous)")


def write_notes(folder: Path, numbers: range, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for number in numbers:
        paragraphs = [" ".join(rng.choices(WORDS, k=60)) for _ in range(rng.randint(2, 8))]
        (folder / f"note{number:04d}.md").write_text(
            f"# Note {number}\n\n" + "\n\n".join(paragraphs) + "\n"
        )


def ingest_loop(soak: Soak) -> None:
    db, notes, args, stop, tally = soak.db, soak.notes, soak.args, soak.stop, soak.tally
    rng = random.Random(3)
    next_number = args.notes
    while not stop.is_set():
        existing = sorted(notes.glob("note*.md"))
        for path in rng.sample(existing, k=max(1, len(existing) // 10)):  # edits
            write_notes(notes, range(int(path.stem[4:]), int(path.stem[4:]) + 1), rng)
        rng.choice(existing).unlink()  # a deletion (archived by --prune)
        write_notes(notes, range(next_number, next_number + 1), rng)  # an addition
        next_number += 1
        done = kbmcp(db, args.embedder, "add", str(notes), "--kb", "notes", "--prune")
        if done.returncode != 0:
            tally.error(f"ingest: {done.stderr.strip()[:300]}")
        with tally.lock:
            tally.ingests += 1
        stop.wait(args.ingest_seconds)


def reembed_later(soak: Soak, delay: float) -> None:
    tally = soak.tally
    if soak.stop.wait(delay):
        return
    started = time.monotonic()
    done = kbmcp(soak.db, soak.args.embedder, "reembed")
    took = time.monotonic() - started
    if done.returncode != 0:
        tally.error(f"reembed: {done.stderr.strip()[:300]}")
        tally.reembed = f"failed after {took:.0f} s"
    else:
        tally.reembed = f"{done.stdout.strip()} (at {delay / 60:.1f} min)"


def sampler(soak: Soak, stdio: StdioServer, http: HttpServer, samples: list[Sample]) -> None:
    db, tally = soak.db, soak.tally
    started = time.monotonic()
    while True:
        with tally.lock:
            requests, errors = sum(tally.requests.values()), len(tally.errors)
        samples.append(
            Sample(
                seconds=time.monotonic() - started,
                stdio_fds=descriptors(stdio.process.pid),
                http_fds=descriptors(http.process.pid),
                stdio_db_fds=descriptors(stdio.process.pid, str(db)),
                http_db_fds=descriptors(http.process.pid, str(db)),
                stdio_rss=rss_mib(stdio.process.pid),
                http_rss=rss_mib(http.process.pid),
                stdio_anon=rss_mib(stdio.process.pid, "RssAnon"),
                http_anon=rss_mib(http.process.pid, "RssAnon"),
                db_mib=size_mib(db),
                wal_mib=size_mib(Path(f"{db}-wal")),
                requests=requests,
                errors=errors,
            )
        )
        last = samples[-1]
        print(
            f"{last.seconds / 60:5.1f} min: {last.requests} requests, {last.errors} errors, "
            f"fds {last.stdio_fds}/{last.http_fds} (file {last.stdio_db_fds}/"
            f"{last.http_db_fds}), WAL {last.wal_mib:.1f} MiB",
            flush=True,
        )
        if soak.stop.wait(soak.args.sample_seconds):
            return


# ----------------------------------------------------------------------------- the run


def build(work: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    db, notes = work / "soak.db", work / "notes"
    for folder, kb in ((REPO_ROOT / "docs", "docs"), (notes, "notes")):
        if folder == notes:
            write_notes(notes, range(args.notes), random.Random(0))
        done = kbmcp(db, args.embedder, "add", str(folder), "--kb", kb)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
    return db, notes


def stop_server(process: subprocess.Popen[str], name: str, tally: Tally) -> float:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        tally.error(f"{name}: did not stop within 60 s of SIGTERM")
        return -1.0
    if code != 0:
        tally.error(f"{name}: exit status {code} after SIGTERM")
    return time.monotonic() - started


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def run(args: argparse.Namespace, work: Path) -> int:
    load_at_start = load_average()
    print(f"building the corpus ({args.embedder} embedder) ...", flush=True)
    db, notes = build(work, args)
    with ThreadPoolExecutor(2) as starting:  # both start at once: each takes seconds
        starting_stdio = starting.submit(StdioServer, db, args.embedder)
        starting_http = starting.submit(HttpServer, db, args.embedder)
        stdio, http = starting_stdio.result(), starting_http.result()
    soak, samples = Soak(db, notes, args), list[Sample]()
    tally = soak.tally
    seconds = args.minutes * 60
    loops: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
        (sampler, (stdio, http, samples)),
        (stdio_bursts, (stdio,)),
        (http_bursts, (http.url,)),
        (ingest_loop, ()),
        (reembed_later, (seconds / 2,)),
        *((http_searcher, (http.url, n)) for n in range(args.searchers)),
    ]
    threads = [threading.Thread(target=loop, args=(soak, *extra)) for loop, extra in loops]
    print(f"soaking for {args.minutes:g} min ...", flush=True)
    for thread in threads:
        thread.start()
    soak.stop.wait(seconds)
    soak.stop.set()
    for thread in threads:
        thread.join()
    wal_before_stop = size_mib(Path(f"{db}-wal"))
    stops = {
        name: stop_server(p, name, tally)
        for name, p in (("stdio", stdio.process), ("http", http.process))
    }
    leftovers = sorted(p.name for p in work.iterdir() if p.name.startswith("soak.db-"))
    conn = apsw.Connection(str(db))  # writable: its close removes the -wal and -shm again
    integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    conn.close()
    for name, server in (("stdio", stdio), ("http", http)):
        logged = [line for line in server.stderr if " ERROR " in line or "Traceback" in line]
        if logged:
            tally.error(f"{name} server logged {len(logged)} error(s): {logged[0].strip()}")
        if args.keep:
            (args.keep / f"{name}-server.log").write_text("".join(server.stderr))
    loads = (load_at_start, load_average())
    print_samples(samples)
    problems = check_bounds(soak, samples, integrity, leftovers)
    print_summary(soak, samples, stops, wal_before_stop, leftovers, integrity, problems, loads)
    for problem in problems:
        print(f"BOUND BROKEN: {problem}")
    return 1 if problems else 0


def warm_index(samples: list[Sample], args: argparse.Namespace) -> int:
    """The first sample after the warm-up (the servers' pools filled, caches built)."""
    for index, sample in enumerate(samples):
        if sample.seconds >= args.warm_up_seconds:
            return index
    return len(samples) - 1


def check_bounds(
    soak: Soak, samples: list[Sample], integrity: str, leftovers: list[str]
) -> list[str]:
    """The bounds the run must hold (see the module's docstring)."""
    args, tally = soak.args, soak.tally
    problems = []
    if tally.errors:
        problems.append(f"{len(tally.errors)} errors (first: {tally.errors[0]})")
    warm = warm_index(samples, args)
    for name in ("stdio", "http"):
        on_file_limit, others_limit = descriptor_limits(soak, name, samples[0])
        on_file = [getattr(s, f"{name}_db_fds") for s in samples]
        others = [getattr(s, f"{name}_fds") - getattr(s, f"{name}_db_fds") for s in samples]
        if max(on_file) > on_file_limit:
            problems.append(
                f"{name}: {max(on_file)} descriptors on the file (limit {on_file_limit}): {on_file}"
            )
        if max(others) > others_limit:
            problems.append(
                f"{name}: {max(others)} other descriptors (limit {others_limit}): {others}"
            )
        anon = [getattr(s, f"{name}_anon") for s in samples]
        growth = max(anon[warm:]) - anon[warm]
        if growth > args.rss_growth_mib:
            problems.append(
                f"{name}: private memory grew {growth:.1f} MiB after the warm-up (limit "
                f"{args.rss_growth_mib:g}): {[round(value) for value in anon]}"
            )
    if max(s.wal_mib for s in samples) > args.wal_limit_mib:
        problems.append(f"WAL reached {max(s.wal_mib for s in samples):.1f} MiB")
    if integrity != "ok":
        problems.append(f"integrity_check: {integrity}")
    if leftovers:
        problems.append(f"left behind after SIGTERM: {leftovers}")
    return problems


def print_samples(samples: list[Sample]) -> None:
    print()
    print(
        "   min  descriptors: stdio (file)  http (file)   RSS (private) MiB: stdio       http"
        "   file MiB  WAL MiB  requests  errors"
    )
    for s in samples:
        print(
            f"{s.seconds / 60:6.1f}  {s.stdio_fds:19d} ({s.stdio_db_fds:2d})  {s.http_fds:6d} "
            f"({s.http_db_fds:2d})  {s.stdio_rss:18.0f} ({s.stdio_anon:4.0f})  "
            f"{s.http_rss:4.0f} ({s.http_anon:4.0f})  {s.db_mib:9.1f}  {s.wal_mib:7.1f}  "
            f"{s.requests:8d}  {s.errors:6d}"
        )


def print_summary(
    soak: Soak,
    samples: list[Sample],
    stops: dict[str, float],
    wal_before_stop: float,
    leftovers: list[str],
    integrity: str,
    problems: list[str],
    loads: tuple[str, str],
) -> None:
    args, tally = soak.args, soak.tally
    warm = warm_index(samples, args)
    limits = {name: descriptor_limits(soak, name, samples[0]) for name in ("stdio", "http")}

    def span(name: str, unit: str, fmt: str) -> str:
        values = [getattr(s, f"{name}_{unit}") for s in samples]
        return f"{values[warm]:{fmt}} → max {max(values[warm:]):{fmt}} → {values[-1]:{fmt}}"

    requests = ", ".join(f"{count} {what}" for what, count in sorted(tally.requests.items()))
    wal = [s.wal_mib for s in samples]
    rows = [
        (
            "duration",
            f"{args.minutes:g} min ({args.embedder} embedder), samples every "
            f"{args.sample_seconds:g} s, warm-up {args.warm_up_seconds:g} s",
        ),
        (
            "load",
            f"bursts of {args.burst} searches every {args.gap_seconds:g}-"
            f"{args.gap_seconds + 3:g} s on stdio (+1 remember) and HTTP (+1 abandoned "
            f"session), {args.searchers} continuous HTTP searchers, an ingest every "
            f"{args.ingest_seconds:g} s, reembed at half time",
        ),
        (
            "machine load (1, 5, 15-min averages; start → end)",
            f"{loads[0]} → {loads[1]} on {os.cpu_count()} cores",
        ),
        ("requests", requests),
        ("errors", str(len(tally.errors))),
        ("ingest runs (edits, additions, deletions)", str(tally.ingests)),
        ("reembed", tally.reembed),
        (
            "stdio server descriptors on the file (start; after warm-up → max → end; limit)",
            f"{samples[0].stdio_db_fds}; {span('stdio', 'db_fds', 'd')}; {limits['stdio'][0]}",
        ),
        (
            "HTTP server descriptors on the file",
            f"{samples[0].http_db_fds}; {span('http', 'db_fds', 'd')}; {limits['http'][0]}",
        ),
        (
            "stdio / HTTP server descriptors in all (min → max)",
            f"{min(s.stdio_fds for s in samples)} → {max(s.stdio_fds for s in samples)} / "
            f"{min(s.http_fds for s in samples)} → {max(s.http_fds for s in samples)}",
        ),
        (
            "stdio server private memory (RssAnon) MiB (start; after warm-up → max → end)",
            f"{samples[0].stdio_anon:.0f}; {span('stdio', 'anon', '.0f')}",
        ),
        (
            "HTTP server private memory MiB",
            f"{samples[0].http_anon:.0f}; {span('http', 'anon', '.0f')}",
        ),
        (
            "stdio / HTTP server RSS MiB with the mapped file (start → end)",
            f"{samples[0].stdio_rss:.0f} → {samples[-1].stdio_rss:.0f} / "
            f"{samples[0].http_rss:.0f} → {samples[-1].http_rss:.0f}",
        ),
        ("file size MiB (start → end)", f"{samples[0].db_mib:.1f} → {samples[-1].db_mib:.1f}"),
        ("WAL MiB (max; at the end, before SIGTERM)", f"{max(wal):.1f}; {wal_before_stop:.1f}"),
        (
            "SIGTERM",
            f"stdio stopped in {stops['stdio']:.1f} s, HTTP in {stops['http']:.1f} s; "
            f"left behind: {', '.join(leftovers) or 'nothing'}",
        ),
        ("integrity_check", integrity),
        (
            "bounds",
            f"all held (private memory +{args.rss_growth_mib:g} MiB after warm-up, WAL "
            f"{args.wal_limit_mib:g} MiB, descriptors as above)"
            if not problems
            else f"{len(problems)} broken",
        ),
    ]
    print()
    print("| measure | value |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` shows where every thread is
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--embedder", default="hash", choices=["hash", "minilm"])
    parser.add_argument("--notes", type=int, default=300, help="generated notes to start with")
    parser.add_argument("--burst", type=int, default=8, help="concurrent searches per burst")
    parser.add_argument(
        "--gap-seconds",
        type=float,
        default=11.0,
        help="idle gap between bursts (> 10 s: worker threads expire)",
    )
    parser.add_argument(
        "--searchers", type=int, default=2, help="HTTP clients searching without pause"
    )
    parser.add_argument("--ingest-seconds", type=float, default=5.0)
    parser.add_argument("--sample-seconds", type=float, default=15.0)
    parser.add_argument("--warm-up-seconds", type=float, default=60.0)
    parser.add_argument(
        "--rss-growth-mib",
        type=float,
        default=40.0,
        help="most a server's private memory may grow after the warm-up",
    )
    parser.add_argument("--wal-limit-mib", type=float, default=64.0)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    if args.keep:
        shutil.rmtree(args.keep, ignore_errors=True)
        args.keep.mkdir(parents=True)
        sys.exit(run(args, args.keep))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
