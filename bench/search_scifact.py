"""Search latency on a real small corpus: BEIR SciFact, one chunk per document, k = 10 and 100.

    python bench/search_scifact.py --dataset DIR [--db FILE] [--limits 10,100] [--modes ...]

`--dataset` is a BEIR-format folder (corpus.jsonl, queries.jsonl, qrels); it is read in place.
The corpus is ingested with kbmcp's own ingest (one Markdown file per document, `# title` then
the abstract) with a chunk size larger than any abstract, so every document is one chunk
(SciFact: 5,183 documents, 5,183 chunks): the shape of notes, tickets, abstracts and memories.
Vectors are the hashing embedder's (384-d); query vectors are computed before timing, so the
time is the engine's, not the model's. `--db` keeps the file for later runs.

The searches run as `kbmcp serve` runs them: one long-lived workspace (its accelerators built),
warmed by `--warmup` rounds of every query in every mode first. For each mode and limit it prints
p50 / p95 of `search()` over the dataset's queries and recall@k against a one-shot workspace
with every shortcut off (bench/search.py's `exact_everything`): the same request brute-forced.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from search import CLOCKS, PrecomputedEmbedder, exact_everything, percentile

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.eval.beir import load_beir
from kbmcp.ingest.chunker import ChunkingOptions
from kbmcp.search.models import MODES, SearchRequest
from kbmcp.service.evaluate import ingest_corpus
from kbmcp.service.search import search
from kbmcp.workspace import Workspace

KNOWLEDGE_BASE = "scifact"
ONE_CHUNK = ChunkingOptions(max_chars=1_000_000, overlap_chars=0)  # no abstract is this long


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="A BEIR-format folder.")
    parser.add_argument("--db", type=Path, help="Keep the ingested file here (reused).")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--limits", default="10,100", help="Result limits (k), comma-separated.")
    parser.add_argument("--queries", type=int, default=0, help="At most this many (0: all).")
    parser.add_argument("--warmup", type=int, default=1, help="Untimed rounds of every query.")
    parser.add_argument(
        "--no-recall", action="store_true", help="Time only (no brute-force comparison)."
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time a caller waits; "
        "cpu: the process's CPU time (comparisons on a busy machine).",
    )
    args = parser.parse_args()
    dataset = load_beir(args.dataset)
    queries = [q.text for q in dataset.queries]
    if args.queries:
        queries = queries[: args.queries]
    modes = args.modes.split(",")
    limits = [int(k) for k in args.limits.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "scifact.db"
        settings = Settings(db=db, embedder="hash")
        embedder = PrecomputedEmbedder(queries)
        with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as ws:
            started = time.perf_counter()
            outcome = ingest_corpus(ws, ws.local_principal(), dataset, KNOWLEDGE_BASE,
                                    chunking=ONE_CHUNK)  # fmt: skip
            chunks = ws.conn.execute("SELECT count(*) FROM indexed_chunk").fetchone()[0]
            verb = "reused" if outcome.reused else "ingested"
            print(f"{verb} {outcome.documents} documents, {chunks} chunks "
                  f"({time.perf_counter() - started:.0f}s)")  # fmt: skip
            ws._embedder = embedder
            with Workspace(settings, embedder=embedder) as reference:
                timed = _measure(
                    ws, reference, queries, modes, limits, args.warmup, not args.no_recall,
                    CLOCKS[args.clock],
                )  # fmt: skip
            print(f"{'mode':<10}{'k':>5}{'p50 ms':>9}{'p95 ms':>9}{'recall@k':>10}")
            for (mode, limit), (timings, recall) in timed.items():
                print(f"{mode:<10}{limit:>5}{percentile(timings, 50):>9.2f}"
                      f"{percentile(timings, 95):>9.2f}{recall:>10.3f}")  # fmt: skip


def _measure(
    ws: Workspace,
    reference: Workspace,
    queries: list[str],
    modes: list[str],
    limits: list[int],
    warmup: int,
    recall: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[tuple[str, int], tuple[list[float], float]]:
    """Per (mode, limit): the latencies (ms) of every query, and mean recall@k."""
    principal = ws.local_principal()
    cells = [(mode, limit) for mode in modes for limit in limits]
    for _ in range(warmup):
        for mode, limit in cells:
            for query in queries:
                search(ws, principal, SearchRequest(query, mode=mode, limit=limit))
    timings: dict[tuple[str, int], list[float]] = {cell: [] for cell in cells}
    # Cells interleaved query by query, so load on the machine falls on every cell alike.
    for query in queries:
        for cell in cells:
            request = SearchRequest(query, mode=cell[0], limit=cell[1])
            started = clock()
            search(ws, principal, request)
            timings[cell].append((clock() - started) * 1000)
    out = {}
    for cell in cells:
        recalls = []
        for query in queries if recall else ():
            request = SearchRequest(query, mode=cell[0], limit=cell[1])
            got = {r.chunk_id for r in search(ws, principal, request).results}
            with exact_everything():
                truth = {r.chunk_id for r in search(reference, principal, request).results}
            if truth:
                recalls.append(len(truth & got) / len(truth))
        out[cell] = (timings[cell], statistics.mean(recalls) if recalls else float("nan"))
    return out


if __name__ == "__main__":
    main()
