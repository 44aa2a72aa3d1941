"""A file of a few thousand documents copied to a Citus cluster and back (issue 35): the same
`kbmcp search --json` answers from the file, the cluster and the copy back, for 40 mixed
queries (every mode, unscoped and in path, tag and metadata scopes).

    python bench/citus_round_trip.py --citus /path/to/citus-14.0.1-pg18-x86_64.tar.gz

The corpus is bench/search.py's (Zipfian words, the hashing embedder's vectors, scopes of
0.1/1/10% as path prefixes, tags and metadata), written straight into the file. It prints the
copies' times, how many answers were compared and whether they were identical (the file and
the copy back byte for byte; the cluster without its timing and strategy names, which name how
each backend found its candidates).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from search import SCOPES, Corpus, build, make_queries, scope_prefix  # noqa: E402

from kbmcp.config import Settings  # noqa: E402
from kbmcp.embed.hashing import HashingEmbedder  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402
from tests.citus_cluster import TARBALL_ENV, CitusCluster  # noqa: E402

MODES = ("hybrid", "lexical", "semantic", "rrf")


def kbmcp(*args: str) -> str:
    env = {**os.environ, "KBMCP_EMBEDDER": "hash"}
    done = subprocess.run([sys.executable, "-m", "kbmcp", *args], env=env, cwd=str(REPO),
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"kbmcp {' '.join(args[:3])}...: {done.stderr.strip()}")
    return done.stdout


def searches(db: str, cases: list[tuple[str, str, list[str]]]) -> list[dict[str, Any]]:
    answers = []
    for query, mode, scope in cases:
        body = json.loads(kbmcp("--db", db, "search", query, "--mode", mode, "--json", *scope))
        body["stats"].pop("elapsed_ms")
        answers.append(body)
    return answers


def without_strategies(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**a, "stats": {k: v for k, v in a["stats"].items() if not k.endswith("_strategy")}}
        for a in answers
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--citus", type=Path, default=os.environ.get(TARBALL_ENV))
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--chunks-per-doc", type=int, default=2)
    args = parser.parse_args()
    if args.citus is None or not Path(args.citus).is_file():
        raise SystemExit(f"a Citus build is needed: --citus PATH or {TARBALL_ENV}")
    work = Path(tempfile.mkdtemp(prefix="kbmcp-round-trip-"))
    shm = Path("/dev/shm")
    root = (shm if shm.is_dir() else Path(tempfile.gettempdir())) / f"kbmcp-rt-{os.getpid()}"
    cluster = CitusCluster(root)
    cluster.install(Path(args.citus))
    try:
        cluster.start(workers=2)
        source = work / "kb.db"
        corpus = Corpus(args.documents * args.chunks_per_doc, chunks_per_doc=args.chunks_per_doc)
        with Workspace(Settings(db=source, embedder="hash"), embedder=HashingEmbedder()) as ws:
            samples = build(ws, corpus)
        # 10 unscoped queries and 10 in each scope (by path, tag or metadata in turn), the
        # modes in turn: 40
        cases: list[tuple[str, str, list[str]]] = []
        for i, query in enumerate(make_queries(corpus, samples["unscoped"], 10)):
            cases.append((query, MODES[i % 4], []))
        for n, scope in enumerate(SCOPES):
            bucket = scope_prefix(scope).rstrip("/")
            for i, query in enumerate(make_queries(corpus, samples[scope], 10)):
                scoped = [["--path", f"{bucket}/"], ["--tag", f"bucket={bucket}"],
                          ["--meta", f"bucket={bucket}"]][i % 3]  # fmt: skip
                cases.append((query, MODES[(i + n) % 4], scoped))
        started = time.perf_counter()
        kbmcp("copy", str(source), cluster.url)
        into = time.perf_counter() - started
        back = work / "back.db"
        started = time.perf_counter()
        kbmcp("copy", cluster.url, str(back))
        out = time.perf_counter() - started
        from_file = searches(str(source), cases)
        from_back = searches(str(back), cases)
        from_cluster = searches(cluster.url, cases)
        results = sum(len(a["results"]) for a in from_file)
        print(f"corpus: {corpus.docs} documents, {corpus.docs * corpus.chunks_per_doc} chunks")
        print(f"kbmcp copy: file to cluster {into:.1f} s, cluster to file {out:.1f} s")
        print(f"{len(cases)} searches ({results} results): copy back == file: "
              f"{from_back == from_file}; cluster == file (strategies aside): "
              f"{without_strategies(from_cluster) == without_strategies(from_file)}")  # fmt: skip
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
