"""What keyword statistics over the readable set cost: `python bench/keyword_stats.py --db FILE`.

FILE is bench/search.py's corpus (build it with `python bench/search.py --db FILE`): one tenant,
one knowledge base of 100k chunks, path scopes of 0.1/1/10%. A copy, FILE.two-tenants.db (made
once), adds a second tenant owning a second knowledge base of --foreign-chunks chunks written
like the first (same words, other draws). The local owner reads every store of FILE (the
index's own statistics, the fast path) and only its own knowledge base in the copy (its
readable set's statistics). For each file the hybrid p50/p95 of the bench's queries, unscoped
and per path scope, on a warm server workspace (accelerators, --warmup queries per scope first)
and on a one-shot workspace (SQL alone, as `kbmcp search`); query vectors are precomputed.
Queries are cached in FILE.queries.json (regenerating them walks the whole corpus).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import numpy as np
from search import (
    CHUNKS_PER_DOC,
    SCOPES,
    Corpus,
    PrecomputedEmbedder,
    build,
    insert_document,
    make_queries,
    scope_prefix,
)

from kbmcp.clock import now_iso
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service.search import search
from kbmcp.store.sqlite.catalog import ensure_knowledge_base, ensure_tenant
from kbmcp.store.sqlite.id_key import id_key_of
from kbmcp.workspace import Workspace

FOREIGN_TENANT = "other"


def queries_of(db: Path, chunks: int, count: int, warmup: int) -> dict[str, dict[str, list[str]]]:
    cache = db.with_suffix(".queries.json")
    if cache.exists():
        saved = json.loads(cache.read_text())
        if saved["count"] == count and saved["warmup"] == warmup:
            return saved["queries"]
    corpus = Corpus(chunks)
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        samples = build(ws, corpus, write=False)
    queries = {
        "measured": {n: make_queries(corpus, s, count) for n, s in samples.items()},
        "warmup": {n: make_queries(corpus, s, warmup, seed=12) for n, s in samples.items()},
    }
    cache.write_text(json.dumps({"count": count, "warmup": warmup, "queries": queries}))
    return queries


def two_tenant_copy(db: Path, chunks: int, foreign_chunks: int) -> Path:
    copy = db.with_suffix(".two-tenants.db")
    if copy.exists():
        return copy
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        ws.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(db, copy)
    corpus = Corpus(chunks)
    with Workspace(Settings(db=copy, embedder="hash"), embedder=HashingEmbedder()) as ws:
        conn = ws.conn
        conn.execute("BEGIN IMMEDIATE")
        tenant = ensure_tenant(conn, FOREIGN_TENANT)
        kb = ensure_knowledge_base(conn, tenant, "other")
        key, now = id_key_of(conn), now_iso()
        for doc in range(foreign_chunks // CHUNKS_PER_DOC):
            rng = np.random.default_rng([99, doc])
            words = [corpus.chunk_words(doc, rng) for _ in range(CHUNKS_PER_DOC)]
            path = f"other/doc{doc:06d}.md"
            insert_document(conn, corpus, kb.id, key.make("document", kb.public_id, path), path,
                            f"Other {doc}", words, now)  # fmt: skip
        conn.execute("COMMIT")
    return copy


def cells() -> list[tuple[str, str, SearchFilters]]:
    out = [("unscoped", "unscoped", SearchFilters())]
    out += [(f"path {n}", n, SearchFilters(document_paths=[scope_prefix(n)])) for n in SCOPES]
    return out


def measure(
    db: Path, queries: dict[str, dict[str, list[str]]], embedder: PrecomputedEmbedder
) -> dict[str, tuple[float, float, float]]:
    """Per cell: server p50, server p95, one-shot p50 (ms)."""
    settings = Settings(db=db, embedder="hash")
    out = {}
    with (
        Workspace(settings, embedder=embedder, long_lived=True) as server,
        Workspace(settings, embedder=embedder) as one_shot,
    ):
        owner = server.local_principal()
        for _, sample, filters in cells():
            for query in queries["warmup"][sample]:
                search(server, owner, SearchRequest(query, filters=filters))
        for label, sample, filters in cells():
            timed = {"server": [], "one_shot": []}
            for query in queries["measured"][sample]:
                for name, ws in (("server", server), ("one_shot", one_shot)):
                    started = time.perf_counter()
                    search(ws, owner, SearchRequest(query, filters=filters))
                    timed[name].append((time.perf_counter() - started) * 1000)
            out[label] = (
                statistics.median(timed["server"]),
                float(np.percentile(timed["server"], 95)),
                statistics.median(timed["one_shot"]),
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--foreign-chunks", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--files", default="single,two-tenants")
    args = parser.parse_args()
    queries = queries_of(args.db, args.chunks, args.queries, args.warmup)
    every = [q for group in queries.values() for qs in group.values() for q in qs]
    files = {"single": args.db}
    if "two-tenants" in args.files:
        files["two-tenants"] = two_tenant_copy(args.db, args.chunks, args.foreign_chunks)
    print(f"{'file':<13}{'scope':<11}{'server p50':>11}{'p95':>8}{'one-shot p50':>14}")
    for name in args.files.split(","):
        for label, (p50, p95, one_shot) in measure(
            files[name], queries, PrecomputedEmbedder(every)
        ).items():
            print(f"{name:<13}{label:<11}{p50:>11.1f}{p95:>8.1f}{one_shot:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
