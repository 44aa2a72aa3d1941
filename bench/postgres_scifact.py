"""SciFact on both backends, query by query: the same service search on an SQLite file and on
its copy in PostgreSQL, with the same query vectors.

Usage (a SciFact file built by `kbmcp eval`, copied into PostgreSQL with `kbmcp copy`):

    kbmcp --db scifact.db eval ./scifact
    kbmcp copy scifact.db postgresql://.../scifact
    python bench/postgres_scifact.py --db scifact.db --pg postgresql://.../scifact \
        --dataset ./scifact [--modes lexical semantic hybrid rrf] [--json]

`kbmcp --db … eval` on each backend gives the metrics a user sees; this script says why they
agree or not. Each judged query is embedded once with the file's model, then searched through
`kbmcp.service.search.search` (what `kbmcp eval`, `kbmcp search` and the MCP tool call) on both
backends, scoped to the corpus's knowledge base as `kbmcp eval` scopes it. Per mode it prints
each backend's metrics (over documents, as `kbmcp eval` computes them), the latency of the
search alone (the query is already embedded: unlike `kbmcp eval`'s, these figures hold no model
time), how many queries returned the same chunks in the same order on both, and the largest
score difference between them. The backends alternate which goes first, so load on a shared
machine hits both alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from kbmcp.config import database, load_settings
from kbmcp.eval.beir import load_beir
from kbmcp.eval.metrics import percentile
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service.evaluate import collapse_to_documents, default_kb_name, mode_metrics
from kbmcp.service.listing import list_knowledge_bases
from kbmcp.service.search import search
from kbmcp.workspace import Workspace

BACKENDS = ("sqlite", "postgres")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="the SQLite file")
    parser.add_argument("--pg", required=True, help="the PostgreSQL URL of its copy")
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--kb", help="the corpus's knowledge base (default: as kbmcp eval)")
    parser.add_argument("--modes", nargs="+", default=["lexical", "semantic", "hybrid", "rrf"])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    dataset = load_beir(options.dataset)
    kb_name = options.kb or default_kb_name(options.dataset)
    settings = load_settings()  # KBMCP_EMBEDDER and the rest, as the CLI reads them
    workspaces = {
        name: Workspace(
            dataclasses.replace(settings, db=database(db)), create=False, long_lived=True
        )
        for name, db in (("sqlite", options.db), ("postgres", options.pg))
    }
    principals = {name: ws.local_principal() for name, ws in workspaces.items()}
    kb_ids = {name: kb_id(ws, principals[name], kb_name) for name, ws in workspaces.items()}
    if kb_ids["sqlite"] is None or kb_ids["sqlite"] != kb_ids["postgres"]:
        raise SystemExit(f"not a copy: knowledge base {kb_name} has ids {kb_ids}")
    vectors = workspaces["sqlite"].embedder.embed([q.text for q in dataset.queries])
    report = {}
    for mode in options.modes:
        runs: dict[str, dict[str, list[str]]] = {name: {} for name in BACKENDS}
        times: dict[str, list[float]] = {name: [] for name in BACKENDS}
        identical = 0
        largest_difference = 0.0
        for n, query in enumerate(dataset.queries):
            request = SearchRequest(
                query=query.text,
                mode=mode,
                limit=options.limit,
                filters=SearchFilters(knowledge_base_ids=[kb_ids["sqlite"]]),
            )
            results = {}
            order = BACKENDS if n % 2 == 0 else BACKENDS[::-1]
            if n == 0:  # untimed warm-up, as kbmcp eval's
                for name in order:
                    search(workspaces[name], principals[name], request, query_vector=vectors[n])
            for name in order:
                started = time.perf_counter()
                response = search(
                    workspaces[name], principals[name], request, query_vector=vectors[n]
                )
                times[name].append((time.perf_counter() - started) * 1000.0)
                results[name] = response.results
                runs[name][query.id] = collapse_to_documents(r.path for r in response.results)
            chunks = {name: [r.chunk_id for r in results[name]] for name in BACKENDS}
            if chunks["sqlite"] == chunks["postgres"]:
                identical += 1
                scores = [
                    abs(a.score - b.score)
                    for a, b in zip(results["sqlite"], results["postgres"], strict=True)
                ]
                largest_difference = max([largest_difference, *scores])
        report[mode] = {
            name: {
                key: round(value, 4)
                for key, value in mode_metrics(runs[name], dataset.qrels, times[name]).items()
            }
            for name in BACKENDS
        } | {
            "latency_p50_ratio": round(
                percentile(times["postgres"], 50) / percentile(times["sqlite"], 50), 2
            ),
            "identical_rankings": identical,
            "queries": len(dataset.queries),
            "largest_score_difference_when_identical": largest_difference,
        }
        if not options.json:
            print_mode(mode, report[mode])
    if options.json:
        print(json.dumps(report, indent=2))
    for ws in workspaces.values():
        ws.close()


def kb_id(workspace: Workspace, principal, name: str) -> str | None:
    for kb in list_knowledge_bases(workspace, principal):
        if kb.name == name:
            return kb.knowledge_base_id
    return None


def print_mode(mode: str, entry: dict) -> None:
    difference = entry["largest_score_difference_when_identical"]
    print(
        f"{mode}: {entry['identical_rankings']}/{entry['queries']} queries with identical "
        f"chunk rankings (largest score difference {difference:.2g}); "
        f"PostgreSQL p50 / SQLite p50 = {entry['latency_p50_ratio']}"
    )
    for name in BACKENDS:
        m = entry[name]
        print(
            f"  {name:<9} nDCG@10 {m['ndcg@10']:.4f}  recall@10 {m['recall@10']:.4f}  "
            f"recall@100 {m['recall@100']:.4f}  MRR@10 {m['mrr@10']:.4f}  "
            f"p50 {m['latency_ms_p50']:.1f} ms  p95 {m['latency_ms_p95']:.1f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
