"""One-shot search latency: the first `search()` of a fresh process (as `kbmcp search` runs).

A one-shot process holds no accelerators: it answers from SQL alone (FTS5, sqlite-vec). For each
query this starts a new Python process that opens the file, runs one search with the query's
precomputed vector (`search(..., query_vector=...)`, so the time is the engine's, not the
model's) and prints its milliseconds; the first run of each round warms the page cache and is
reported apart. The search engine's modules, which the first search of a process imports, are
imported before the search is timed and their import time is reported beside it: a CLI search
pays both. Prints every run and the median (`--clock cpu`: the search's CPU time instead of
the wall time, for comparisons on a busy machine).

    python bench/search_one_shot.py --db /tmp/b100k.db            # a file built by search.py
    python bench/search_one_shot.py --db /tmp/b100k.db --mode lexical --scope s01/
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from search import CHUNKS_PER_DOC, Corpus, PrecomputedEmbedder, build, make_queries

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.workspace import Workspace

ONE_SEARCH = """
import json, sys, time
from pathlib import Path
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service.search import search
from kbmcp.workspace import Workspace

db, queries, index, mode, scope, clock = sys.argv[1:7]
clock = {"wall": time.perf_counter, "cpu": time.process_time}[clock]
query, vector = json.load(open(queries))[int(index)]
filters = SearchFilters(document_paths=[scope]) if scope else SearchFilters()
with Workspace(Settings(db=Path(db), embedder="hash"), embedder=HashingEmbedder()) as ws:
    principal = ws.local_principal()
    started = clock()
    import kbmcp.search.engine, kbmcp.store.sqlite.search.engine  # what a first search imports
    imported = clock()
    search(ws, principal, SearchRequest(query, mode=mode, filters=filters), query_vector=vector)
    print((clock() - imported) * 1000, (imported - started) * 1000)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="A file built by bench/search.py")
    parser.add_argument("--chunks", type=int, default=100_000, help="As the file was built.")
    parser.add_argument(
        "--chunks-per-doc", type=int, default=CHUNKS_PER_DOC, help="As the file was built."
    )
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--scope", default="", help="A path prefix (default: unscoped).")
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="wall",
        help="wall: time a caller waits; cpu: the search's CPU time in its process "
        "(comparisons on a busy machine).",
    )
    args = parser.parse_args()
    corpus = Corpus(args.chunks, chunks_per_doc=args.chunks_per_doc)
    with Workspace(Settings(db=args.db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        samples = build(ws, corpus, write=False)
    queries = make_queries(corpus, samples["unscoped"], args.queries)
    vectors = PrecomputedEmbedder(queries).embed(queries)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump([[q, [float(x) for x in v]] for q, v in zip(queries, vectors, strict=True)],
                  handle)  # fmt: skip
    timings: list[float] = []
    imports: list[float] = []
    for round_ in range(args.rounds):
        for index in range(args.queries):
            run = subprocess.run(
                [sys.executable, "-c", ONE_SEARCH, str(args.db), handle.name, str(index),
                 args.mode, args.scope, args.clock],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            ms, import_ms = (float(value) for value in run.stdout.split())
            first = round_ == 0 and index == 0
            print(f"query {index}: {ms:.0f} ms (+ {import_ms:.0f} ms of imports)"
                  f"{'  (first run: cold page cache)' if first else ''}")  # fmt: skip
            if not first:
                timings.append(ms)
                imports.append(import_ms)
    Path(handle.name).unlink()
    scope = args.scope or "unscoped"
    median, low, high = statistics.median(timings), min(timings), max(timings)
    print(f"one-shot {args.mode} {scope} ({args.clock}): median {median:.0f} ms over "
          f"{len(timings)} fresh processes (min {low:.0f}, max {high:.0f}); the engine's imports "
          f"before it: median {statistics.median(imports):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
