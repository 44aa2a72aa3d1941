"""Real chunks and real queries embedded once with the default model, cached outside the repository.

    python bench/real_vectors.py --scifact DIR [--chunks 25000] [--cache DIR]

The bench's generated vectors (bench/vector_shape.py) are fitted to and checked against these.
The texts are real documents chunked the way kbmcp ingests them (`chunk_document` with the
default options, each chunk's model input from `chunk_embedding_input`), in this order until
`--chunks` chunks:

- every SciFact abstract (`DIR/corpus.jsonl`, read in place: a BEIR folder), as a Markdown
  document `# title` then the abstract;
- this repository's README.md and docs/*.md;
- the long descriptions of the installed Python distributions (their READMEs);
- the docstrings of the standard library's modules, then of the installed packages' modules,
  one Markdown document per module (a heading per class and function), in module-name order.

The queries are real questions: SciFact's claims (`DIR/queries.jsonl`) and this repository's
docs questions (bench/docs-questions/queries.jsonl).

Embedding ~25k chunks takes 15-20 minutes of both cores on an idle 2-core machine: run it once,
in the background (`nice -n 10`). It embeds in pieces of 512 texts kept in the cache, so an
interrupted run resumes where it stopped. The cache key is the model's fingerprint and every
input text: another model, chunking or source set embeds anew. What it writes
(`CACHE/real-KEY.npz`: `vectors`, `sources`; `CACHE/real-KEY.texts.jsonl`: one chunk's model
input a line; the same for queries under `queries-KEY`) is what `load_real` reads.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata
import itertools
import json
import os
import sysconfig
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.ingest.chunker import chunk_document

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kbmcp-bench"
DEFAULT_CHUNKS = 25_000
PIECE = 512  # texts embedded (and saved) at a time: the unit an interrupted run resumes from
DOCS_QUESTIONS = REPO / "bench" / "docs-questions" / "queries.jsonl"


@dataclass(frozen=True)
class RealSet:
    """Unit vectors (float32, rows) with the source of each ("scifact", "docs", ...)."""

    vectors: np.ndarray
    sources: np.ndarray
    texts: list[str]
    documents: np.ndarray | None = None  # each row's document (a number), when recorded


@dataclass(frozen=True)
class Document:
    source: str
    title: str
    content: str
    kind: str  # a chunker kind: markdown or text


def scifact_documents(dataset: Path) -> Iterator[Document]:
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            title = row.get("title", "").strip()
            yield Document("scifact", title, f"# {title}\n\n{row['text']}\n", "markdown")


def project_documents() -> Iterator[Document]:
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        yield Document("docs", path.stem, path.read_text(encoding="utf-8"), "markdown")


def distribution_documents() -> Iterator[Document]:
    """Installed distributions' long descriptions (Markdown or reStructuredText READMEs)."""
    seen: set[str] = set()
    dists = sorted(importlib.metadata.distributions(), key=lambda d: d.metadata["Name"] or "")
    for dist in dists:
        name = dist.metadata["Name"] or ""
        body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""  # type: ignore[attr-defined]
        if name.lower() in seen or len(body) < 200:
            continue
        seen.add(name.lower())
        content_type = dist.metadata["Description-Content-Type"] or ""
        kind = "markdown" if "markdown" in content_type else "text"
        yield Document("packages", name, body, kind)


def docstring_documents(root: Path, source: str) -> Iterator[Document]:
    """One Markdown document per Python module under `root`: its docstring, then a heading and
    the docstring of each class and function that has one (tests, private modules, vendored
    copies and kbmcp itself left out)."""
    skipped = ("test", "_", "idle", "site-packages", "lib2to3", "kbmcp", "pip", "setuptools")
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p.startswith(skipped) or p == "vendor" for p in parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(parts).removesuffix(".py").removesuffix(".__init__")
        sections = [f"# {module}\n\n{ast.get_docstring(tree) or ''}"]
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 80 and not node.name.startswith("_"):
                    sections.append(f"## {node.name}\n\n{doc}")
        if len(sections) > 1 or len(sections[0]) > 300:
            yield Document(source, module, "\n\n".join(sections) + "\n", "markdown")


def real_chunks(dataset: Path, limit: int) -> tuple[list[str], list[str], list[int]]:
    """(model input, source, document number) of at most `limit` real chunks, in the module
    docstring's order."""
    texts: list[str] = []
    sources: list[str] = []
    numbers: list[int] = []
    seen: set[str] = set()
    paths = sysconfig.get_paths()
    documents = itertools.chain(
        scifact_documents(dataset), project_documents(), distribution_documents(),
        docstring_documents(Path(paths["stdlib"]), "stdlib"),
        docstring_documents(Path(paths["purelib"]), "packages"),
    )  # fmt: skip
    for number, document in enumerate(documents):
        for chunk in chunk_document(document.content, document.kind):
            text = chunk_embedding_input(document.title, chunk.heading_path, chunk.text)
            if len(chunk.text.strip()) < 40 or text in seen:
                continue  # a lone heading or a repeated paragraph says nothing of the shape
            seen.add(text)
            texts.append(text)
            sources.append(document.source)
            numbers.append(number)
            if len(texts) == limit:
                return texts, sources, numbers
    return texts, sources, numbers


def real_queries(dataset: Path) -> tuple[list[str], list[str]]:
    texts, sources = [], []
    for path, source in ((dataset / "queries.jsonl", "scifact"), (DOCS_QUESTIONS, "docs")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                texts.append(json.loads(line)["text"])
                sources.append(source)
    return texts, sources


def cache_key(texts: Sequence[str], fingerprint: str) -> str:
    digest = hashlib.sha256(fingerprint.encode())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()[:16]


def embed_cached(
    texts: Sequence[str],
    sources: Sequence[str],
    name: str,
    cache: Path,
    progress: bool = True,
    from_end: bool = False,
    documents: Sequence[int] | None = None,
) -> Path | None:
    """Embed `texts` with the default model into `cache/NAME-KEY.npz` (resuming from pieces
    already embedded) unless it is there; returns its path. `from_end`: embed the pieces last
    first and stop there (None), leaving the set to a run from the start: two runs share
    the work."""
    from kbmcp.embed.minilm import FINGERPRINT, MiniLMEmbedder

    key = cache_key(texts, repr(FINGERPRINT))
    target = cache / f"{name}-{key}.npz"
    if target.exists():
        return target
    pieces = cache / f"{name}-{key}.pieces"
    pieces.mkdir(parents=True, exist_ok=True)
    inputs = pieces / "inputs.json"  # what the pieces are of (`save_partial` reads it)
    if not inputs.exists():
        partial = inputs.with_suffix(f".{os.getpid()}.json")
        partial.write_text(json.dumps({"texts": list(texts), "sources": list(sources),
                                       "documents": list(documents or [])}))  # fmt: skip
        partial.replace(inputs)
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    done_now = 0
    starts = list(range(0, len(texts), PIECE))
    for first in reversed(starts) if from_end else starts:
        piece = pieces / f"{first:07d}.npy"
        if piece.exists():
            continue
        vectors = embedder.embed(list(texts[first : first + PIECE]))
        partial = piece.with_suffix(f".{os.getpid()}.npy")
        np.save(partial, vectors)
        partial.replace(piece)  # a piece is whole or absent
        done_now += len(vectors)
        if progress:
            rate = done_now / (time.perf_counter() - started)
            print(f"  {name}: {first + len(vectors)}/{len(texts)} embedded ({rate:.1f}/s)",
                  flush=True)  # fmt: skip
    if from_end:
        return None
    vectors = np.concatenate(
        [np.load(pieces / f"{first:07d}.npy") for first in range(0, len(texts), PIECE)]
    )
    with target.with_suffix(".texts.jsonl").open("w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps(text) + "\n")
    np.savez(target.with_suffix(".tmp.npz"), vectors=vectors, sources=np.asarray(sources))
    target.with_suffix(".tmp.npz").replace(target)
    if documents is not None:
        np.save(target.with_suffix(".documents.npy"), np.asarray(documents, dtype=np.int64))
    for piece in pieces.iterdir():
        piece.unlink()
    pieces.rmdir()
    return target


def save_partial(cache: Path) -> Path:
    """The chunks whose pieces are embedded so far, as a set of their own
    (`chunks-partial-KEY.npz`, with its texts and documents): a check can run on them while
    the rest is embedded. The texts are the ones the pieces were embedded from (kept beside
    them): a later edit of docs/ changes the key of a new run, not what the pieces are.
    Returns its path."""
    folders = sorted(cache.glob("chunks-*.pieces"), key=lambda p: p.stat().st_mtime)
    if not folders or not (folders[-1] / "inputs.json").exists():
        raise SystemExit(f"no chunks being embedded in {cache} (or from an older script)")
    pieces = folders[-1]
    inputs = json.loads((pieces / "inputs.json").read_text())
    texts, sources, numbers = inputs["texts"], inputs["sources"], inputs["documents"]
    starts = [f for f in range(0, len(texts), PIECE) if (pieces / f"{f:07d}.npy").exists()]
    if not starts:
        raise SystemExit(f"no piece embedded yet in {pieces}")
    rows = np.concatenate([np.arange(f, min(f + PIECE, len(texts))) for f in starts])
    vectors = np.concatenate([np.load(pieces / f"{f:07d}.npy") for f in starts])
    key = pieces.name.removeprefix("chunks-").removesuffix(".pieces")
    target = cache / f"chunks-partial-{key}.npz"
    with target.with_suffix(".texts.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(texts[row]) + "\n")
    if numbers:
        np.save(target.with_suffix(".documents.npy"), np.asarray(numbers)[rows])
    np.savez(target, vectors=vectors, sources=np.asarray(sources)[rows])
    return target


def load_real(path: Path) -> RealSet:
    with np.load(path) as data:
        vectors, sources = data["vectors"], data["sources"]
    with path.with_suffix(".texts.jsonl").open(encoding="utf-8") as handle:
        texts = [json.loads(line) for line in handle]
    numbers = path.with_suffix(".documents.npy")
    documents = np.load(numbers) if numbers.exists() else None
    return RealSet(vectors.astype(np.float32), sources, texts, documents)


def find_cached(cache: Path, name: str) -> Path:
    """The cached set called `name` that the other benches read: the newest whole one, else
    the newest partial one (`--partial`)."""
    found = sorted(cache.glob(f"{name}-*.npz"),
                   key=lambda p: ("-partial-" not in p.name, p.stat().st_mtime))  # fmt: skip
    if not found:
        raise SystemExit(
            f"no {name} vectors in {cache}: run `python bench/real_vectors.py --scifact DIR` first"
        )
    return found[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, required=True, help="A BEIR SciFact folder.")
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument(
        "--partial",
        action="store_true",
        help="Write the chunks embedded so far as a set of their own and stop (no embedding).",
    )
    parser.add_argument(
        "--from-end",
        action="store_true",
        help="Embed the last pieces first and stop: a second process beside a running one.",
    )
    args = parser.parse_args()
    if args.cache.resolve().is_relative_to(REPO):
        raise SystemExit("--cache must be outside the repository: the vectors are not committed")
    texts, sources, numbers = real_chunks(args.scifact, args.chunks)
    counts = {s: sources.count(s) for s in dict.fromkeys(sources)}
    print(f"{len(texts)} real chunks: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.partial:
        path = save_partial(args.cache)
        print(f"partial set: {len(np.load(path)['vectors'])} chunks in {path}")
        return
    queries, query_sources = real_queries(args.scifact)
    print(f"{len(queries)} real queries", flush=True)
    for name, items, origin in (("queries", queries, query_sources), ("chunks", texts, sources)):
        documents = numbers if name == "chunks" else None
        path = embed_cached(items, origin, name, args.cache, from_end=args.from_end,
                            documents=documents)  # fmt: skip
        print(f"{name}: {path or 'pieces embedded'}", flush=True)
    if path is not None and not path.with_suffix(".documents.npy").exists():
        # Which chunks share a document (the check holds out whole documents: a chunk's own
        # neighbours in its document would make a held-out chunk's nearest rows too near).
        np.save(path.with_suffix(".documents.npy"), np.asarray(numbers, dtype=np.int64))


if __name__ == "__main__":
    main()
