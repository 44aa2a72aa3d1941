"""What bearer-token authentication costs per `search_knowledge` call over HTTP, measured fairly.

Two `kbmcp serve --http` processes run at once over two copies of the same corpus: one file
without tokens (unauthenticated, loopback) and one with a token (every request verified). Calls
alternate between them, so background load hits both alike. Prints p50/p95 of each and the
difference of the medians. Uses the corpus of bench/mcp_roundtrip.py (build it with that first).

    python bench/auth_overhead.py --db /tmp/rt-small.db --calls 300
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp_roundtrip import QUERIES, percentile, start_http  # noqa: E402

from kbmcp.config import Settings  # noqa: E402
from kbmcp.service.tokens import create_token  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402


async def alternate(open_url: str, auth_url: str, secret: str, calls: int, warmup: int):
    headers = {"Authorization": f"Bearer {secret}"}
    timings: dict[str, list[float]] = {"http": [], "http+token": []}
    async with (
        Client(open_url) as plain,
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(auth_url, http_client=http)) as authed,
    ):
        for i in range(warmup + calls):
            query = f"{QUERIES[i % len(QUERIES)]} {i}"
            order = [("http", plain), ("http+token", authed)]
            for name, client in order if i % 2 else reversed(order):
                started = time.perf_counter()
                result = await client.call_tool("search_knowledge", {"query": query})
                elapsed = (time.perf_counter() - started) * 1000
                if result.is_error:
                    raise SystemExit(f"{name}: {result.content}")
                if i >= warmup:
                    timings[name].append(elapsed)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=REPO_ROOT / "bench" / ".cache" / "roundtrip.db")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        open_db, auth_db = Path(tmp) / "open.db", Path(tmp) / "auth.db"
        shutil.copy(args.db, open_db)
        shutil.copy(args.db, auth_db)
        with Workspace(Settings(db=auth_db, embedder="minilm")) as ws:
            secret = create_token(
                ws, ws.local_principal(), tenant="local", scopes=["knowledge:read"]
            ).secret
        with start_http(open_db) as open_url, start_http(auth_db) as auth_url:
            timings = asyncio.run(alternate(open_url, auth_url, secret, args.calls, args.warmup))
    print(f"{args.calls} alternating calls each")
    print(f"{'server':<11} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for name, values in timings.items():
        print(
            f"{name:<11} {percentile(values, 50):>8.2f} {percentile(values, 95):>8.2f} "
            f"{statistics.fmean(values):>8.2f}"
        )
    base, auth = (percentile(timings[n], 50) for n in ("http", "http+token"))
    print(f"p50 difference: {auth - base:+.2f} ms ({(auth - base) / base * 100:+.1f}%)")


if __name__ == "__main__":
    main()
