"""SciFact on both backends: nDCG@10 and latency of the PostgreSQL ranking against SQLite's engine.

Usage (a SciFact file built by `kbmcp eval`, copied into PostgreSQL with `kbmcp copy`):

    python bench/postgres_scifact.py --db scifact.db --pg postgresql://... \
        --dataset DIR [--vectors queries.npy] [--modes lexical hybrid]

Both backends rank the same data with the same query vectors (`--vectors`: one row per judged
query, in the dataset's order; else each query is embedded once with the file's model). Until
the service runs on PostgreSQL (issue 18, phase B) the PostgreSQL side resolves the readable
set and scope from the file (same ids) and times the ranking alone (statistics + statement).
Queries alternate between the backends, so load on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from kbmcp.access import readable
from kbmcp.clock import now_iso
from kbmcp.config import Settings
from kbmcp.eval.beir import load_beir
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.search.query_text import query_terms
from kbmcp.search.query_vector import unit
from kbmcp.search.request import check_arguments
from kbmcp.search.scope import resolve_scope
from kbmcp.service.evaluate import beir_id_from_path, first_of_each, mode_metrics
from kbmcp.service.search import search
from kbmcp.store.postgres.connection import connect
from kbmcp.store.postgres.ranking import RankRequest, rank
from kbmcp.workspace import Workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--pg", required=True)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--vectors", type=Path)
    parser.add_argument("--modes", nargs="+", default=["lexical", "hybrid"])
    parser.add_argument("--limit", type=int, default=100)
    options = parser.parse_args()
    dataset = load_beir(options.dataset)
    ws = Workspace(Settings(db=options.db), long_lived=False)
    pg = connect(options.pg)
    principal = ws.local_principal()
    vectors = np.load(options.vectors) if options.vectors else None
    report = {}
    for mode in options.modes:
        runs: dict[str, dict[str, list[str]]] = {"sqlite": {}, "postgres": {}}
        times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
        for n, query in enumerate(dataset.queries):
            request = SearchRequest(query=query.text, mode=mode, limit=options.limit)
            args = check_arguments(request, ws.settings.rrf_k)
            vector = None
            if args.uses_semantic:
                vector = vectors[n] if vectors is not None else ws.embedder.embed([query.text])[0]
            started = time.perf_counter()
            response = search(ws, principal, request, query_vector=vector)
            times["sqlite"].append(time.perf_counter() - started)
            runs["sqlite"][query.id] = first_of_each(
                beir_id_from_path(r.path) for r in response.results
            )
            can_read = readable(ws.store, ws.conn, principal)
            scope = resolve_scope(ws.store, ws.conn, can_read, SearchFilters())
            started = time.perf_counter()
            ranked = rank(
                pg,
                RankRequest(
                    terms=query_terms(args.query),
                    query_vector=None if vector is None else unit(np.asarray(vector)),
                    lexical=args.uses_lexical,
                    readable_stores=can_read.all_ids,
                    searched_stores=can_read.all_ids,
                    scope_ids=None,
                    every_store=scope.everything,
                    mode=mode,
                    alpha=args.alpha,
                    rrf_k=args.rrf_k,
                    depth=args.depth,
                    limit=args.limit,
                    now=now_iso(),
                ),
            )
            times["postgres"].append(time.perf_counter() - started)
            runs["postgres"][query.id] = first_of_each(
                beir_id_from_path(row.path) for row in ranked.ranking.rows
            )
        report[mode] = {
            backend: {
                "ndcg@10": round(mode_metrics(runs[backend], dataset.qrels, [])["ndcg@10"], 4),
                "p50_ms": round(statistics.median(times[backend]) * 1000, 1),
            }
            for backend in runs
        } | {
            "identical_rankings": sum(
                runs["sqlite"][q] == runs["postgres"][q] for q in runs["sqlite"]
            ),
            "queries": len(runs["sqlite"]),
        }
        print(mode, json.dumps(report[mode]), flush=True)
    pg.close()
    ws.close()


if __name__ == "__main__":
    main()
