"""Round-trip latency of a `search_knowledge` query call over stdio, HTTP, and HTTP with a token.

Builds (or reuses) a 10,000-chunk corpus embedded with the default model (MiniLM; ingesting takes
a few minutes on 2 cores), starts `kbmcp serve` as a real subprocess for each transport, and
times `call_tool("search_knowledge", {"query": ...})` from the SDK client: JSON-RPC framing,
argument checks, query embedding with the default model, retrieval and the response. Prints
p50/p95 per transport. Target: p50 <= 40 ms. "http+token" sends `Authorization: Bearer` with a
token created for the run (and revoked after it, so the plain "http" run stays unauthenticated):
the cost of authentication is the difference between the two HTTP rows.

    python bench/mcp_roundtrip.py                 # corpus in ./bench/.cache/roundtrip.db
    python bench/mcp_roundtrip.py --calls 300 --db /tmp/rt.db
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
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from kbmcp.config import Settings  # noqa: E402
from kbmcp.service.ingest import IngestOptions, add_paths  # noqa: E402
from kbmcp.service.listing import list_knowledge_bases  # noqa: E402
from kbmcp.service.tokens import create_token, revoke_token  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402

TOPICS = [
    "database",
    "backup",
    "restore",
    "network",
    "latency",
    "cache",
    "index",
    "vector",
    "search",
    "deploy",
    "rollback",
    "certificate",
    "token",
    "queue",
    "worker",
    "shard",
    "replica",
    "migration",
    "schema",
    "alert",
    "dashboard",
    "metric",
    "log",
    "trace",
    "kernel",
    "memory",
    "disk",
    "cpu",
    "container",
    "cluster",
    "secret",
    "policy",
]
VERBS = [
    "configure",
    "rotate",
    "monitor",
    "scale",
    "inspect",
    "repair",
    "tune",
    "document",
    "verify",
    "restart",
    "upgrade",
    "archive",
    "compress",
    "encrypt",
    "replicate",
]
QUERIES = [
    "how do I restore a database backup",
    "rotate the TLS certificate",
    "cache latency alert",
    "scale the worker queue",
    "upgrade the cluster kernel",
    "encrypt secrets at rest",
    "vector index tuning",
    "rollback a failed deploy",
    "disk full on a replica",
    "trace slow search requests",
    "schema migration checklist",
    "monitor memory of containers",
]
SECTIONS_PER_DOC = 10


def sentence(rng: random.Random) -> str:
    words = [rng.choice(VERBS), "the", rng.choice(TOPICS), "and", rng.choice(TOPICS)]
    words += rng.choices(TOPICS + VERBS + ["when", "before", "after", "with", "for"], k=10)
    return " ".join(words).capitalize() + "."


def write_corpus(root: Path, chunks: int) -> None:
    """Markdown documents of SECTIONS_PER_DOC short sections: one chunk per section."""
    rng = random.Random(0)
    for doc in range(chunks // SECTIONS_PER_DOC):
        lines = [f"# Runbook {doc}: {rng.choice(TOPICS)} {rng.choice(TOPICS)}", ""]
        for section in range(SECTIONS_PER_DOC - 1):
            lines += [f"## {rng.choice(VERBS).capitalize()} {rng.choice(TOPICS)} {section}", ""]
            lines += [" ".join(sentence(rng) for _ in range(4)), ""]
        path = root / f"area-{doc % 20:02d}" / f"runbook-{doc:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines), encoding="utf-8")


def ensure_corpus(db: Path, chunks: int) -> int:
    with Workspace(Settings(db=db, embedder="minilm")) as ws:
        principal = ws.local_principal()
        have = sum(kb.chunk_count for kb in list_knowledge_bases(ws, principal))
        if have >= chunks:
            return have
        with tempfile.TemporaryDirectory() as tmp:
            write_corpus(Path(tmp), chunks)
            print(f"ingesting ~{chunks} chunks with MiniLM (a few minutes)...", file=sys.stderr)
            started = time.perf_counter()
            report = add_paths(ws, principal, [Path(tmp)], IngestOptions(knowledge_base="bench"))
            print(
                f"  {report.summary_line()} ({time.perf_counter() - started:.0f}s)", file=sys.stderr
            )
        return sum(kb.chunk_count for kb in list_knowledge_bases(ws, principal))


def server_env(db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBMCP_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "KBMCP_DB": str(db), "KBMCP_EMBEDDER": "minilm"})
    return env


async def time_calls(client: Client, calls: int, warmup: int) -> list[tuple[float, float]]:
    """(round trip ms, server-side search ms from stats.elapsed_ms) per call."""
    timings = []
    for i in range(warmup + calls):
        query = f"{QUERIES[i % len(QUERIES)]} {i}"  # distinct queries: nothing can be cached
        started = time.perf_counter()
        result = await client.call_tool("search_knowledge", {"query": query, "limit": 10})
        elapsed = (time.perf_counter() - started) * 1000
        if result.is_error or not result.structured_content["results"]:
            raise SystemExit(f"search failed: {result.content}")
        if i >= warmup:
            timings.append((elapsed, result.structured_content["stats"]["elapsed_ms"]))
    return timings


async def over_stdio(db: Path, calls: int, warmup: int) -> list[tuple[float, float]]:
    params = StdioServerParameters(
        command=sys.executable, env=server_env(db), args=["-m", "kbmcp", "--db", str(db), "serve"]
    )
    async with Client(params) as client:
        return await time_calls(client, calls, warmup)


@contextlib.contextmanager
def start_http(db: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """`kbmcp serve --http --port 0` over `db` (environment `env`, default: the default
    model's); yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "serve", "--http", "--port", "0"],
        env=server_env(db) if env is None else env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line and process.poll() is not None:
                raise SystemExit("HTTP server exited")
            match = re.search(r"listening on (http://\S+)", line)
            url = match.group(1) if match else None
        if url is None:
            raise SystemExit("HTTP server did not start")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


async def over_http(
    db: Path, calls: int, warmup: int, secret: str | None = None
) -> list[tuple[float, float]]:
    with start_http(db) as url:
        if secret is None:
            async with Client(url) as client:
                return await time_calls(client, calls, warmup)
        headers = {"Authorization": f"Bearer {secret}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await time_calls(client, calls, warmup)


async def over_http_with_token(db: Path, calls: int, warmup: int) -> list[tuple[float, float]]:
    with Workspace(Settings(db=db, embedder="minilm")) as ws:
        created = create_token(
            ws, ws.local_principal(), tenant="local", scopes=["knowledge:read"], name="bench"
        )
    try:
        return await over_http(db, calls, warmup, secret=created.secret)
    finally:
        with Workspace(Settings(db=db, embedder="minilm")) as ws:
            revoke_token(ws, ws.local_principal(), created.token.token_id)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=REPO_ROOT / "bench" / ".cache" / "roundtrip.db")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--transport",
        action="append",
        choices=["stdio", "http", "http+token"],
        help="transports to time (repeatable; default: all three)",
    )
    args = parser.parse_args()
    args.transport = args.transport or ["stdio", "http", "http+token"]
    args.db.parent.mkdir(parents=True, exist_ok=True)
    total = ensure_corpus(args.db, args.chunks)
    print(f"corpus: {total} chunks, model minilm, {args.calls} calls per transport")
    print(f"{'transport':<11} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'search p50':>11}")
    transports = [("stdio", over_stdio), ("http", over_http), ("http+token", over_http_with_token)]
    for name, run in transports:
        if name not in args.transport:
            continue
        timings = asyncio.run(run(args.db, args.calls, args.warmup))
        round_trips = [t for t, _ in timings]
        searches = [s for _, s in timings]
        print(
            f"{name:<11} {percentile(round_trips, 50):>8.1f} {percentile(round_trips, 95):>8.1f} "
            f"{statistics.fmean(round_trips):>8.1f} {percentile(searches, 50):>11.1f}"
        )
    print("search p50: the engine's own stats.elapsed_ms (query embedding + retrieval)")


if __name__ == "__main__":
    main()
