"""Ingest benchmark: throughput of `add_paths` and the rate of a no-change re-add.

Generates a corpus of Markdown files (front matter on some, headings, paragraphs of English-like
text) in a temporary folder and prints a small table:

- ingest with the hashing embedder: chunks/s overall and chunks/s excluding embedding time
  (the embedder is wrapped and timed), i.e. walking, parsing, chunking, hashing and SQLite writes;
- ingest with the default MiniLM embedder on a smaller subset: chunks/s (embedding dominates);
- a no-change re-add of many small files: seconds and files/s (files are read, hashed and
  parsed; nothing is chunked, embedded or written).

Rates are given per wall-clock second and per CPU second of this process: on a shared machine the
CPU figure is the steadier one (the work is single-threaded except MiniLM's onnxruntime, whose
CPU time counts every thread it uses).

Targets (issue 2): >= 3,000 chunks/s excluding embedding; a no-change re-add of 10,000 files in
under 5 s.

    python bench/ingest.py                   # defaults: 2,000 files, 10,000 re-add, ~300 MiniLM
    python bench/ingest.py --files 500 --readd-files 2000 --minilm-chunks 0   # quick
    python bench/ingest.py --docs docs      # only: the default model on a real folder (chunks/s)
    python bench/ingest.py --postgres URL   # only: the hashing ingest into a file, then into an
                                            # empty PostgreSQL database (one per run: createdb)
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder, Embedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service.ingest import IngestReport, add_paths
from kbmcp.workspace import Workspace

_WORD_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their can has been if more when will "
    "would who so no index search query vector chunk document revision embedding model file "
    "database table column row schema migration transaction agent server client request token "
    "knowledge base tenant share scope filter limit rank score fusion lexical semantic hybrid "
    "latency throughput cache memory disk network release version deploy config option default "
    "user team project meeting notes design review decision question answer example summary "
    "install build test check error warning retry timeout lock write read open close path"
)
_HEADING_TEXT = (
    "Overview Background Installation Configuration Usage Examples Architecture Storage "
    "Indexing Search Ranking Limits Security Tokens Sharing Troubleshooting Performance "
    "Roadmap Decisions Glossary Appendix"
)
WORDS = _WORD_TEXT.split()
HEADINGS = _HEADING_TEXT.split()


class TimedEmbedder(DelegatingEmbedder):
    """Accumulates the wall-clock and CPU time spent in `embed`."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu_seconds += time.process_time() - cpu_started
            self.texts += len(texts)


# --------------------------------------------------------------------------- corpus


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(6, 18))
    return " ".join(words).capitalize() + rng.choice(".....?!")


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(2, 6)))


def markdown_file(rng: random.Random, number: int, sections: tuple[int, int]) -> str:
    parts = []
    if rng.random() < 0.3:
        parts.append(
            f"---\ntitle: Note {number}\ntags: [{rng.choice(HEADINGS).lower()}, bench]\n"
            f"owner: team-{rng.randint(1, 9)}\n---\n"
        )
    parts.append(f"# {' '.join(rng.choices(HEADINGS, k=2))} {number}\n\n{paragraph(rng)}\n")
    for _ in range(rng.randint(*sections)):
        parts.append(f"\n## {rng.choice(HEADINGS)}\n\n")
        parts.append("\n\n".join(paragraph(rng) for _ in range(rng.randint(1, 3))) + "\n")
        if rng.random() < 0.2:
            parts.append("\n```python\nresult = search(query, limit=10)\nprint(result)\n```\n")
    return "".join(parts)


def write_corpus(folder: Path, files: int, sections: tuple[int, int], seed: int) -> int:
    """Write `files` Markdown files under `folder` (100 per subfolder); returns total chars."""
    rng = random.Random(seed)
    total = 0
    for number in range(files):
        sub = folder / f"part{number // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        text = markdown_file(rng, number, sections)
        (sub / f"note{number:05d}.md").write_text(text, encoding="utf-8")
        total += len(text)
    return total


# --------------------------------------------------------------------------- runs


@dataclass
class Timing:
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time: steadier than wall time on a busy machine


def ingest(db: Path | str, folder: Path, embedder: Embedder) -> tuple[IngestReport, Timing]:
    with Workspace(Settings(db=db, embedder="hash"), embedder=embedder) as workspace:
        started, cpu_started = time.perf_counter(), time.process_time()
        report = add_paths(workspace, workspace.local_principal(), [folder])
        elapsed = Timing(time.perf_counter() - started, time.process_time() - cpu_started)
        return report, elapsed


def bench_hashing(tmp: Path, files: int, db: Path | str | None = None) -> dict[str, float]:
    """The hashing run, into a new file (or `db`: an empty PostgreSQL database)."""
    folder = tmp / "corpus"
    if not folder.exists():
        write_corpus(folder, files, (2, 6), seed=1)
    embedder = TimedEmbedder(HashingEmbedder())
    report, elapsed = ingest(tmp / "hash.db" if db is None else db, folder, embedder)
    return rates(report.chunks_indexed, elapsed, embedder) | {"files": files}


COUNT_DOCUMENTS = "SELECT count(*) FROM document"


def require_empty(url: str) -> None:
    """Stop unless the database at `url` holds no documents (an ingest into it would then be
    a re-add, not the timed first add)."""
    with Workspace(Settings(db=url, embedder="hash"), embedder=HashingEmbedder()) as workspace:
        held = int(workspace.conn.execute(COUNT_DOCUMENTS).fetchone()[0])
    if held:
        raise SystemExit(
            f"--postgres: the database holds {held:,} documents; give it an empty one "
            "(a new database per run)"
        )


def hashing_rows(result: dict[str, float], where: str) -> list[tuple[str, str, str, str]]:
    return [
        (
            f"ingest into {where}, hashing embedder ({result['files']:,} files, "
            f"{result['chunks']:,} chunks)",
            f"{result['chunks_per_s']:,.0f}",
            f"{result['chunks_per_cpu_s']:,.0f}",
            f"{result['seconds']:.2f} s",
        ),
        (
            "  excluding embedding (target >= 3,000 chunks/s)",
            f"{result['rest_chunks_per_s']:,.0f}",
            f"{result['rest_chunks_per_cpu_s']:,.0f}",
            f"{result['rest_seconds']:.2f} s",
        ),
    ]


def print_rows(rows: list[tuple[str, str, str, str]]) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"kbmcp ingest benchmark ({os.cpu_count()} CPUs, load average {load:.2f})")
    width = max(len(row[0]) for row in rows)
    print(f"{'run (chunks/s unless noted)':<{width}}  {'wall':>8}  {'per CPU-s':>9}  time")
    for label, wall, cpu, elapsed_text in rows:
        print(f"{label:<{width}}  {wall:>8}  {cpu:>9}  {elapsed_text}")


def rates(chunks: int, elapsed: Timing, embedder: TimedEmbedder) -> dict[str, float]:
    rest, rest_cpu = elapsed.seconds - embedder.seconds, elapsed.cpu_seconds - embedder.cpu_seconds
    return {
        "chunks": chunks,
        "seconds": elapsed.seconds,
        "rest_seconds": rest,
        "chunks_per_s": chunks / elapsed.seconds,
        "chunks_per_cpu_s": chunks / elapsed.cpu_seconds,
        "rest_chunks_per_s": chunks / rest,
        "rest_chunks_per_cpu_s": chunks / rest_cpu,
    }


def bench_minilm(tmp: Path, target_chunks: int) -> dict[str, float]:
    from kbmcp.embed.minilm import MiniLMEmbedder

    folder = tmp / "minilm"
    files = max(1, target_chunks // 5)  # ~5.5 chunks per generated file
    write_corpus(folder, files, (2, 6), seed=2)
    inner = MiniLMEmbedder()
    load_started = time.perf_counter()
    inner.load()
    load_seconds = time.perf_counter() - load_started
    embedder = TimedEmbedder(inner)
    report, elapsed = ingest(tmp / "minilm.db", folder, embedder)
    return rates(report.chunks_indexed, elapsed, embedder) | {
        "files": files,
        "load_seconds": load_seconds,
    }


def bench_readd(tmp: Path, files: int) -> dict[str, float]:
    folder = tmp / "small"
    write_corpus(folder, files, (0, 1), seed=3)
    embedder = TimedEmbedder(HashingEmbedder())
    first, first_elapsed = ingest(tmp / "readd.db", folder, embedder)
    embedded_before = embedder.texts
    second, elapsed = ingest(tmp / "readd.db", folder, embedder)
    if second.unchanged != files or embedder.texts != embedded_before:
        raise SystemExit(f"re-add was not a no-op: {second.summary_line()}")
    return {
        "files": files,
        "first_seconds": first_elapsed.seconds,
        "first_chunks": first.chunks_indexed,
        "seconds": elapsed.seconds,
        "cpu_seconds": elapsed.cpu_seconds,
        "files_per_s": files / elapsed.seconds,
        "files_per_cpu_s": files / elapsed.cpu_seconds,
    }


def bench_folder(tmp: Path, folder: Path) -> dict[str, float]:
    """`add` of a real folder (e.g. the repository's docs/) with the default model."""
    from kbmcp.embed.minilm import MiniLMEmbedder

    inner = MiniLMEmbedder()
    inner.load()
    embedder = TimedEmbedder(inner)
    report, elapsed = ingest(tmp / "folder.db", folder, embedder)
    tokens = model_tokens(tmp / "folder.db", inner)
    return rates(report.chunks_indexed, elapsed, embedder) | {
        "files": report.added,
        "tokens_per_chunk": tokens / max(1, report.chunks_indexed),
    }


# Every indexed chunk's text (the embedding input adds the title and heading path to it).
INDEXED_TEXTS = """
SELECT c.text FROM indexed_chunk AS i JOIN chunk AS c ON c.id = i.chunk_id
"""


def model_tokens(db: Path, model: Embedder) -> int:
    """The tokens the model reads of the folder's chunks (truncated as it truncates them),
    counted after the timed run: the model's cost grows with tokens, not chunks, so a corpus
    of long chunks (code examples) embeds fewer chunks per second."""
    tokenizer = model._tokenizer  # type: ignore[attr-defined]
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder()) as workspace:
        texts = [text for (text,) in workspace.conn.execute(INDEXED_TEXTS)]
    return sum(len(encoding.ids) for encoding in tokenizer.encode_batch(texts))


def print_folder(folder: Path, result: dict[str, float]) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"kbmcp ingest of {folder} ({os.cpu_count()} CPUs, load average {load:.2f})")
    print(
        f"default model: {result['files']:,.0f} files, {result['chunks']:,.0f} chunks in "
        f"{result['seconds']:.2f} s: {result['chunks_per_s']:,.1f} chunks/s "
        f"({result['chunks_per_cpu_s']:,.1f} per CPU-s, "
        f"{result['chunks_per_cpu_s'] * result['tokens_per_chunk']:,.0f} tokens per CPU-s at "
        f"{result['tokens_per_chunk']:.0f} tokens a chunk); excluding embedding "
        f"{result['rest_chunks_per_s']:,.0f} chunks/s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000, help="files for the timed ingest")
    parser.add_argument("--readd-files", type=int, default=10_000, help="files re-added")
    parser.add_argument(
        "--minilm-chunks", type=int, default=300, help="chunks for the MiniLM run (0: skip)"
    )
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        metavar="FOLDER",
        help="only ingest FOLDER (e.g. the repository's docs/) with the default model",
    )
    parser.add_argument(
        "--postgres",
        default=None,
        metavar="URL",
        help="only the hashing ingest, into a new file and then into this PostgreSQL database, "
        "which must hold no documents (the server's CPU is not this process's: compare the "
        "wall rates)",
    )
    args = parser.parse_args(argv)
    if args.postgres is not None:
        require_empty(args.postgres)
        with tempfile.TemporaryDirectory(prefix="kbmcp-bench-") as name:
            in_file = bench_hashing(Path(name), args.files)
            in_postgres = bench_hashing(Path(name), args.files, args.postgres)
        print_rows(hashing_rows(in_file, "a file") + hashing_rows(in_postgres, "PostgreSQL"))
        return
    if args.docs is not None:
        with tempfile.TemporaryDirectory(prefix="kbmcp-bench-") as name:
            print_folder(args.docs, bench_folder(Path(name), args.docs))
        return
    with tempfile.TemporaryDirectory(prefix="kbmcp-bench-") as name:
        tmp = Path(name)
        hashing = bench_hashing(tmp, args.files)
        minilm = bench_minilm(tmp, args.minilm_chunks) if args.minilm_chunks > 0 else None
        readd = bench_readd(tmp, args.readd_files)
    rows = hashing_rows(hashing, "a file")
    if minilm:
        rows += [
            (
                f"ingest, MiniLM ({minilm['files']:,} files, {minilm['chunks']:,} chunks)",
                f"{minilm['chunks_per_s']:,.1f}",
                f"{minilm['chunks_per_cpu_s']:,.1f}",
                f"{minilm['seconds']:.2f} s (+{minilm['load_seconds']:.2f} s load)",
            ),
            (
                "  excluding embedding",
                f"{minilm['rest_chunks_per_s']:,.0f}",
                f"{minilm['rest_chunks_per_cpu_s']:,.0f}",
                f"{minilm['rest_seconds']:.2f} s",
            ),
        ]
    rows += [
        (
            f"first add of {readd['files']:,} small files ({readd['first_chunks']:,} chunks)",
            f"{readd['first_chunks'] / readd['first_seconds']:,.0f}",
            "",
            f"{readd['first_seconds']:.2f} s",
        ),
        (
            f"no-change re-add of {readd['files']:,} files (target < 5 s), files/s",
            f"{readd['files_per_s']:,.0f}",
            f"{readd['files_per_cpu_s']:,.0f}",
            f"{readd['seconds']:.2f} s ({readd['cpu_seconds']:.2f} s CPU)",
        ),
    ]
    print_rows(rows)


if __name__ == "__main__":
    main()
