"""Search latency of a long-lived process while another process adds a document every second.

A server's accelerators (kbmcp/search/accelerator.py) follow writes in place: the documents
the index change log names are re-read, nothing else. This prints hybrid p50/p95 for the same
queries on an idle file and while a writer process (`kbmcp add` semantics through the library,
the hashing embedder the benchmark file records) adds one small document a second, and the
ratio of the two p50s (target: within 2x).

    python bench/search_under_ingest.py --db /tmp/b100k.db   # a file built by bench/search.py
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from search import (
    CHUNKS_PER_DOC,
    SCOPES,
    Corpus,
    PrecomputedEmbedder,
    build,
    make_queries,
    scope_prefix,
)

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service.search import search
from kbmcp.workspace import Workspace

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kbmcp.config import Settings
    from kbmcp.embed.hashing import HashingEmbedder
    from kbmcp.service.ingest import IngestOptions, add_paths
    from kbmcp.workspace import Workspace

    db, folder, seconds = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    started, n = time.monotonic(), 0
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        while time.monotonic() - started < seconds:
            path = folder / f"note{n:04d}.md"
            path.write_text(f"# Note {n}\\n\\nA note about zebra crossings number {n}.\\n" * 3)
            add_paths(ws, ws.local_principal(), [path], IngestOptions(knowledge_base="live"))
            n += 1
            time.sleep(max(0.0, started + n - time.monotonic()))
    print(n, flush=True)
    """
)


def measure(
    ws: Workspace, requests: list[SearchRequest], seconds: float
) -> tuple[list[float], int]:
    """Run the requests round-robin for `seconds`; latencies in ms and the number of rounds."""
    timings: list[float] = []
    started, rounds = time.monotonic(), 0
    principal = ws.local_principal()
    while time.monotonic() - started < seconds:
        for request in requests:
            began = time.perf_counter()
            search(ws, principal, request)
            timings.append((time.perf_counter() - began) * 1000)
        rounds += 1
    return timings, rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="A file built by bench/search.py")
    parser.add_argument("--chunks", type=int, default=100_000, help="As the file was built.")
    parser.add_argument(
        "--chunks-per-doc", type=int, default=CHUNKS_PER_DOC, help="As the file was built."
    )
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    corpus = Corpus(args.chunks, chunks_per_doc=args.chunks_per_doc)
    ws = Workspace(
        Settings(db=args.db, embedder="hash"), embedder=HashingEmbedder(), long_lived=True
    )
    samples = build(ws, corpus, write=False)
    scope = next(iter(SCOPES))
    queries = {
        "unscoped": make_queries(corpus, samples["unscoped"], args.queries),
        scope: make_queries(corpus, samples[scope], args.queries),
    }
    ws._embedder = PrecomputedEmbedder([q for qs in queries.values() for q in qs])
    requests = [SearchRequest(q) for q in queries["unscoped"]] + [
        SearchRequest(q, filters=SearchFilters(document_paths=[scope_prefix(scope)]))
        for q in queries[scope]
    ]
    measure(ws, requests, 5.0)  # warm the accelerators
    idle, _ = measure(ws, requests, args.seconds)
    with tempfile.TemporaryDirectory() as folder:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(args.db), folder, str(args.seconds + 2)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.0)  # the writer's start-up
        busy, _ = measure(ws, requests, args.seconds)
        added = int((writer.communicate()[0] or "0").strip() or 0)
    ws.close()
    for name, timings in (("idle", idle), ("ingesting", busy)):
        print(
            f"{name:<10} hybrid p50 {statistics.median(timings):6.1f} ms"
            f"  p95 {float(np.percentile(timings, 95)):6.1f} ms  ({len(timings)} searches)"
        )
    print(f"documents added meanwhile: {added}")
    print(f"p50 ratio ingesting / idle: {statistics.median(busy) / statistics.median(idle):.2f}")


if __name__ == "__main__":
    main()
