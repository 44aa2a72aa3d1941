"""Grow a Citus cluster while kbmcp serves (issue 35 item 5): add a third worker and move shards
to it with `citus_rebalance_start()` while two `kbmcp serve --http` processes answer searches
and a third process ingests.

A local cluster (a coordinator and two workers, tests/citus_cluster.py, from the Citus build
named by --citus or KBMCP_TEST_CITUS_TARBALL) gets a corpus of many tenants, each with its
own knowledge base (so the stores spread over the shards), copied in with `kbmcp copy`. Then:

1. before: searchers (several MCP sessions on each server, bearer tokens of several tenants)
   run hybrid searches for --phase seconds; a writer process adds one document a second to a
   tenant's knowledge base through the library (`kbmcp add` semantics) from here to the end;
2. during: a third worker is started and added, and `citus_rebalance_start()` moves shards to
   it (logical replication, the default transfer mode) while the searches go on, until
   `citus_rebalance_status()` says it finished;
3. after: --phase seconds more.

It prints each phase's searches, errors and p50/p95 latency, the writer's documents and errors,
the shards moved, each node's stores and chunks before and after (as `kbmcp doctor` counts
them), and whether a fixed set of searches (every mode, scoped and not, of tenants the writer
does not touch) answers exactly the same before and after the move (and during it).

    python bench/citus_rebalance.py --citus /path/to/citus-14.0.1-pg18-x86_64.tar.gz

The machine's other load moves latencies a lot (2 cores shared here): compare phases within a
run. Citus is AGPL-3.0: a bench and test dependency, never part of kbmcp.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from kbmcp.config import Settings  # noqa: E402
from kbmcp.embed.hashing import HashingEmbedder  # noqa: E402
from kbmcp.search.models import SearchFilters, SearchRequest  # noqa: E402
from kbmcp.service.ingest import IngestOptions, add_paths  # noqa: E402
from kbmcp.service.search import search  # noqa: E402
from kbmcp.service.tenants import act_as_tenant, create_tenant  # noqa: E402
from kbmcp.service.tokens import create_token  # noqa: E402
from kbmcp.store.copy import copy_store  # noqa: E402
from kbmcp.store.postgres import citus  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402
from tests.access_support import bearer_client  # noqa: E402
from tests.citus_cluster import TARBALL_ENV, CitusCluster  # noqa: E402
from tests.mcp_support import HttpServer  # noqa: E402

VOCABULARY = (
    "shard replica vector index query token posting store tenant coordinator worker rebalance "
    "latency snapshot commit cluster node search hybrid keyword semantic memory document "
    "chunk revision schema migration copy backup restore failover standby primary partition "
    "zebra quokka narwhal wombat platypus axolotl pangolin okapi tapir ibis"
)
WORDS = VOCABULARY.split()
QUERIES = (
    "vector index shard",
    "tenant coordinator",
    "rebalance latency snapshot",
    "hybrid keyword semantic",
    "failover standby primary",
    "quokka narwhal",
    "memory document chunk",
    "backup restore copy",
)
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kbmcp.config import Settings
    from kbmcp.embed.hashing import HashingEmbedder
    from kbmcp.service.ingest import IngestOptions, add_paths
    from kbmcp.service.tenants import act_as_tenant
    from kbmcp.workspace import Workspace

    db, folder, tenant, stop = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    written = failed = 0
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        principal = act_as_tenant(ws, ws.local_principal(), tenant)
        started = time.monotonic()
        while not stop.exists():
            path = folder / f"live{written + failed:05d}.md"
            path.write_text(f"# Live note {written}\\n\\nShard rebalance note {written}.\\n" * 3)
            try:
                add_paths(ws, principal, [path], IngestOptions(knowledge_base="kb"))
                written += 1
            except Exception as exc:
                failed += 1
                print(f"write failed: {exc}", file=sys.stderr, flush=True)
            time.sleep(max(0.0, started + written + failed - time.monotonic()))
    print(written, failed, flush=True)
    """
)


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def build_corpus(root: Path, tenants: int, documents: int) -> Path:
    """A file with `tenants` tenants, each with a knowledge base `kb` of `documents`
    documents of four sections."""
    rng = random.Random(35)
    db = root / "corpus.db"
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as ws:
        admin = ws.local_principal()
        for t in range(tenants):
            name = f"tenant{t:02d}"
            create_tenant(ws, admin, name)
            folder = root / name
            folder.mkdir()
            for d in range(documents):
                sections = "\n\n".join(f"## Section {s}\n\n{_text(rng, 60)}" for s in range(4))
                (folder / f"doc{d:03d}.md").write_text(f"# Document {d} of {name}\n\n{sections}\n")
            add_paths(ws, act_as_tenant(ws, admin, name), [folder],
                      IngestOptions(knowledge_base="kb"))  # fmt: skip
    return db


def tokens(url: str, tenants: Sequence[str]) -> list[str]:
    with Workspace(Settings(db=url, embedder="hash"), embedder=HashingEmbedder()) as ws:
        admin = ws.local_principal()
        made = [create_token(ws, admin, tenant=t, scopes=["knowledge:read"]) for t in tenants]
        return [token.secret for token in made]


def node_holdings(url: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return citus.nodes(conn)


def reference_answers(url: str, tenants: Sequence[str]) -> list[Any]:
    """The fixed searches whose answers must not change when shards move."""
    answers = []
    with Workspace(Settings(db=url, embedder="hash"), embedder=HashingEmbedder()) as ws:
        for tenant in tenants:
            principal = act_as_tenant(ws, ws.local_principal(), tenant)
            for mode in ("hybrid", "lexical", "semantic", "rrf"):
                for query in QUERIES[:5]:
                    for filters in (SearchFilters(), SearchFilters(document_paths=["doc00"])):
                        request = SearchRequest(query=query, mode=mode, limit=10, filters=filters)
                        response = search(ws, principal, request)
                        answers.append([(r.chunk_id, round(r.score, 9)) for r in response.results])
    return answers


async def _searcher(url: str, secret: str, phase_of: list[Phase], stop: threading.Event) -> None:
    rng = random.Random(hash(secret))
    async with (
        bearer_client(secret) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        while not stop.is_set():
            phase = phase_of[0]
            started = time.perf_counter()
            try:
                result = await client.call_tool(
                    "search_knowledge", {"query": rng.choice(QUERIES), "mode": "hybrid"}
                )
                if result.is_error:
                    phase.errors.append(str(result.content)[:200])
                else:
                    phase.latencies.append((time.perf_counter() - started) * 1000)
            except Exception as exc:
                phase.errors.append(f"{type(exc).__name__}: {exc}"[:200])


def run_searchers(urls: Sequence[str], secrets: Sequence[str], sessions: int,
                  phase_of: list[Phase], stop: threading.Event) -> threading.Thread:  # fmt: skip
    async def main() -> None:
        await asyncio.gather(*(
            _searcher(urls[i % len(urls)], secrets[i % len(secrets)], phase_of, stop)
            for i in range(sessions)
        ))  # fmt: skip

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    return thread


def wait_for_rebalance(url: str) -> tuple[str, int]:
    """Poll citus_rebalance_status() until the job ends; its state and the shard moves."""
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT state, details FROM citus_rebalance_status()").fetchone()
            if row is None or row[0] in ("finished", "failed", "cancelled"):
                break
            time.sleep(1.0)
        moves = conn.execute(
            "SELECT count(*) FROM pg_dist_background_task WHERE job_id ="
            " (SELECT max(job_id) FROM pg_dist_background_job) AND command LIKE '%move%'"
        ).fetchone()[0]
    return ("no job" if row is None else str(row[0])), int(moves)


def summary(phase: Phase) -> str:
    lat = sorted(phase.latencies)
    if not lat:
        return f"{phase.name:7s} searches 0, errors {len(phase.errors)}"
    p50 = statistics.median(lat)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
    return (f"{phase.name:7s} searches {len(lat):5d}, errors {len(phase.errors):3d}, "
            f"p50 {p50:7.1f} ms, p95 {p95:7.1f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--citus", type=Path, default=os.environ.get(TARBALL_ENV),
                        help=f"the Citus build tarball (default: ${TARBALL_ENV})")  # fmt: skip
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--documents", type=int, default=40, help="documents per tenant")
    parser.add_argument("--phase", type=float, default=30.0, help="seconds before and after")
    parser.add_argument("--sessions", type=int, default=4, help="search sessions in all")
    parser.add_argument("--root", type=Path, default=None, help="where the cluster lives")
    args = parser.parse_args()
    if args.citus is None or not Path(args.citus).is_file():
        raise SystemExit(f"a Citus build is needed: --citus PATH or {TARBALL_ENV}")
    work = Path(tempfile.mkdtemp(prefix="kbmcp-rebalance-"))
    shm = Path("/dev/shm")
    root = args.root or (shm if shm.is_dir() else Path(tempfile.gettempdir())) / (
        f"kbmcp-bench-citus-{os.getpid()}"
    )
    cluster = CitusCluster(root)
    cluster.install(Path(args.citus))
    servers: list[HttpServer] = []
    writer: subprocess.Popen[str] | None = None
    try:
        cluster.start(workers=2)
        url = cluster.url
        print(f"cluster: coordinator and 2 workers under {root}", flush=True)
        source = build_corpus(work, args.tenants, args.documents)
        started = time.perf_counter()
        copy_store(str(source), url, force=True)
        print(f"corpus: {args.tenants} tenants x {args.documents} documents, copied in "
              f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
        names = [f"tenant{t:02d}" for t in range(args.tenants)]
        stable, written_to = names[1:], names[0]
        secrets = tokens(url, stable)
        before_nodes = node_holdings(url)
        answers_before = reference_answers(url, stable[:6])
        servers = [HttpServer(url), HttpServer(url)]  # type: ignore[arg-type]
        phases = [Phase("before"), Phase("during"), Phase("after")]
        phase_of = [phases[0]]
        stop = threading.Event()
        live = work / "live"
        live.mkdir()
        stop_file = work / "stop"
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, str(live), written_to, str(stop_file)],
            cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        searchers = run_searchers([s.url for s in servers], secrets, args.sessions, phase_of,
                                  stop)  # fmt: skip
        time.sleep(args.phase)
        phase_of[0] = phases[1]
        moved_at = time.perf_counter()
        cluster.add_worker()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT citus_rebalance_start()")
        answers_during = reference_answers(url, stable[:6])
        state, moves = wait_for_rebalance(url)
        took = time.perf_counter() - moved_at
        phase_of[0] = phases[2]
        time.sleep(args.phase)
        stop.set()
        searchers.join(timeout=30)
        stop_file.write_text("stop")
        out, err = writer.communicate(timeout=120)
        written, failed = (int(x) for x in out.split())
        answers_after = reference_answers(url, stable[:6])
        after_nodes = node_holdings(url)
        print(f"rebalance: {state}, {moves} shard moves, {took:.1f} s (third worker added)")
        for phase in phases:
            print(summary(phase))
            for error in phase.errors[:3]:
                print(f"  error: {error}")
        print(f"writer: {written} documents added, {failed} failed"
              + (f" ({err.strip().splitlines()[-1]})" if failed else ""))  # fmt: skip
        print(f"fixed searches: {len(answers_before)}; after == before: "
              f"{answers_after == answers_before}; during == before: "
              f"{answers_during == answers_before}")  # fmt: skip
        for label, holdings in (("before", before_nodes), ("after", after_nodes)):
            print(f"nodes {label}: " + "; ".join(
                f"{n['role']} {n['node']}: {n['stores']} stores, {n['chunks']} chunks"
                for n in holdings))  # fmt: skip
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
        for server in servers:
            server.stop()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
