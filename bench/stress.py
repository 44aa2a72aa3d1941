"""Stress: an HTTP server, a stdio server and CLI ingests on one file at once, then HTTP scaling.

1. Builds a corpus file (this repository's docs and a generated set of notes, hashing embedder
   so the run measures kbmcp, not the model; `--embedder minilm` for the real one).
2. Starts `kbmcp serve --http` and `kbmcp serve` (stdio) as subprocesses on the file, and for
   `--seconds` runs `--clients` searching clients over HTTP, one over stdio, and `--writers`
   writer processes, each a loop of `kbmcp add` runs (CLI processes) that edit, add and delete
   notes. Every response is checked: a tool error or a transport failure counts as an error.
3. Prints requests served, errors (must be 0), p50/p95 per transport, the ingest runs, and
   `PRAGMA integrity_check` of the file afterwards.
4. Measures HTTP throughput (requests/s, no writers) with 1 client and with 8.

    python bench/stress.py                      # 60 s, 8 HTTP clients, 2 writers
    python bench/stress.py --seconds 20 --clients 4
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import apsw  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_roundtrip import start_http  # noqa: E402

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


def http_server(db: Path, embedder: str) -> contextlib.AbstractContextManager[str]:
    """`kbmcp serve --http --port 0` over `db`; yields its URL."""
    return start_http(db, env(embedder))


class Tally:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = {}
        self.errors: list[str] = []

    def record(self, transport: str, seconds: float) -> None:
        self.latencies.setdefault(transport, []).append(seconds * 1000)


async def search_loop(client: Client, transport: str, until: float, tally: Tally) -> None:
    rng = random.Random(transport)
    while time.monotonic() < until:
        query = rng.choice(QUERIES)
        started = time.perf_counter()
        try:
            result = await client.call_tool("search_knowledge", {"query": query, "limit": 5})
        except Exception as error:  # a transport failure is an error of the run, not a crash
            tally.errors.append(f"{transport}: {type(error).__name__}: {error}")
            continue
        if result.is_error:
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            tally.errors.append(f"{transport}: {text[:200]}")
        else:
            tally.record(transport, time.perf_counter() - started)


async def http_clients(url: str, clients: int, until: float, tally: Tally) -> None:
    async with contextlib.AsyncExitStack() as stack:
        connected = [await stack.enter_async_context(Client(url)) for _ in range(clients)]
        await asyncio.gather(*(search_loop(c, "http", until, tally) for c in connected))


async def stdio_client(db: Path, embedder: str, until: float, tally: Tally) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbmcp", "--db", str(db), "serve"],
        env=env(embedder),
        cwd=str(REPO_ROOT),
    )
    async with Client(params) as client:
        await search_loop(client, "stdio", until, tally)


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


async def stress(args: argparse.Namespace, db: Path, work: Path) -> Tally:
    tally = Tally()
    with http_server(db, args.embedder) as url:
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
        results = await asyncio.gather(*writers)
    runs = sum(r for r, _ in results)
    failed = sum(f for _, f in results)
    if failed:
        tally.errors.append(f"{failed} of {runs} ingest runs failed")
    tally.latencies.setdefault("ingest runs", []).extend([0.0] * runs)
    return tally


async def throughput(db: Path, embedder: str, clients: int, seconds: float) -> float:
    tally = Tally()
    with http_server(db, embedder) as url:
        async with Client(url) as warm:  # load the model and the accelerators first
            for query in QUERIES:
                await warm.call_tool("search_knowledge", {"query": query, "limit": 5})
        await http_clients(url, clients, time.monotonic() + seconds, tally)
    if tally.errors:
        raise SystemExit(f"throughput run had errors: {tally.errors[:3]}")
    return len(tally.latencies.get("http", [])) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8, help="searching HTTP clients")
    parser.add_argument("--writers", type=int, default=2, help="CLI ingest loops")
    parser.add_argument("--embedder", default="hash", choices=["hash", "minilm"])
    parser.add_argument("--throughput-seconds", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = work / "stress.db"
        built = kbmcp(db, args.embedder, "add", str(REPO_ROOT / "docs"), "--kb", "docs")
        if built.returncode != 0:
            raise SystemExit(built.stderr)
        write_notes(work / "notes", 200, random.Random(0))
        kbmcp(db, args.embedder, "add", str(work / "notes"), "--kb", "notes")
        tally = asyncio.run(stress(args, db, work))
        served = sum(len(v) for k, v in tally.latencies.items() if k != "ingest runs")
        print(f"{args.seconds:.0f} s: {args.clients} HTTP clients, 1 stdio client, "
              f"{args.writers} writers (CLI ingest loops)")  # fmt: skip
        print(f"requests served: {served}; ingest runs: {len(tally.latencies['ingest runs'])}")
        for transport in ("http", "stdio"):
            values = tally.latencies.get(transport, [])
            if values:
                cuts = statistics.quantiles(values, n=20)
                print(f"  {transport:<6} {len(values):>6} requests  p50 "
                      f"{statistics.median(values):6.1f} ms  p95 {cuts[18]:6.1f} ms")  # fmt: skip
        print(f"errors: {len(tally.errors)}")
        for error in tally.errors[:10]:
            print(f"  {error}")
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        print(f"integrity_check: {conn.execute('PRAGMA integrity_check').fetchone()[0]}")
        conn.close()
        one = asyncio.run(throughput(db, args.embedder, 1, args.throughput_seconds))
        eight = asyncio.run(throughput(db, args.embedder, 8, args.throughput_seconds))
        print(f"HTTP throughput: 1 client {one:.0f} req/s, 8 clients {eight:.0f} req/s "
              f"({eight / one:.2f}x)")  # fmt: skip
        if tally.errors:
            sys.exit(1)


if __name__ == "__main__":
    main()
