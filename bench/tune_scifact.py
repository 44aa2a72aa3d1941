"""Tuning experiments for kbmcp's retrieval defaults, on a BEIR dataset already ingested into a
kbmcp file (e.g. by `kbmcp --db /tmp/kbmcp-eval/scifact.db eval /path/to/scifact`).

Reads the chunks and their stored vectors straight from the file (SQL + numpy), rebuilds FTS5
tables in memory for tokenizer variants, and prints nDCG@10 / recall@10 / recall@100 / MRR@10 for:
tokenizer (porter or not), query-term combination (OR / AND) and splitting, column weights,
exact dense, alpha-weighted hybrid over an alpha grid, RRF over an rrf_k grid, candidate depths,
chunk-level vs document-level fusion, hybrid normalisations that keep weak keyword evidence weak
(`fusion`). Every chunk ranking is collapsed to documents (a document ranks where its best chunk
ranks) before the metrics. A dataset of files (corpus.paths, e.g. bench/docs-questions) is read
from the file its `kbmcp eval` built.

    python bench/tune_scifact.py /tmp/kbmcp-eval/scifact.db [--dataset DIR] [--kb NAME]
        [--section lexical,dense,hybrid,norm,noise,depth,fusion]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import apsw
import numpy as np

from kbmcp.eval.beir import BeirDataset, CorpusFiles, load_beir
from kbmcp.eval.metrics import evaluate_run, ndcg_at_k
from kbmcp.service.evaluate import beir_id_from_path

Ranking = list[tuple[int, float]]  # (chunk row, score), best first
SCIFACT = Path("/work/shared/data/scifact")
TOKENIZERS = {
    "porter": "porter unicode61 remove_diacritics 2",
    "unicode61": "unicode61 remove_diacritics 2",
}
SELECT_CHUNKS = """
SELECT c.id, d.path, d.source, d.title, c.heading_path, c.text, v.embedding
FROM knowledge_base AS kb
JOIN document AS d ON d.knowledge_base_id = kb.id AND d.status = 'published'
JOIN chunk AS c ON c.revision_id = d.current_revision_id
JOIN chunk_vector AS v ON v.chunk_id = c.id
WHERE kb.name = ?
ORDER BY c.id
"""


@dataclass
class Corpus:
    doc_of_row: list[str]  # BEIR id of each chunk row
    titles: list[str]
    headings: list[str]
    bodies: list[str]
    vectors: np.ndarray  # (rows, dim) float32, unit length


def load_corpus(db: Path, kb: str, files: CorpusFiles | None = None) -> Corpus:
    """The knowledge base's chunks; a chunk's document is its BEIR id, or for a corpus of
    files (corpus.paths) its file's corpus id."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    rows = conn.execute(SELECT_CHUNKS, (kb,)).fetchall()
    conn.close()
    if not rows:
        raise SystemExit(f"{db}: knowledge base {kb!r} has no indexed chunks")
    if files is not None:
        doc_of_row = [files.corpus_id(source) or path for _id, path, source, *_ in rows]
    else:
        doc_of_row = [beir_id_from_path(path) or path for _id, path, *_ in rows]
    rows = [(row_id, path, *rest) for row_id, path, _source, *rest in rows]
    return Corpus(
        doc_of_row=doc_of_row,
        titles=[title for _id, _p, title, *_ in rows],
        headings=[" > ".join(json.loads(h)) for *_x, h, _t, _e in rows],
        bodies=[text for *_x, text, _e in rows],
        vectors=np.vstack([np.frombuffer(e, dtype=np.float32) for *_x, e in rows]),
    )


def build_fts(corpus: Corpus) -> apsw.Connection:
    """An in-memory file with one FTS5 table per tokenizer, same columns as chunk_fts."""
    conn = apsw.Connection(":memory:")
    rows = [
        (i, t, h, b)
        for i, (t, h, b) in enumerate(
            zip(corpus.titles, corpus.headings, corpus.bodies, strict=True)
        )
    ]
    for name, tokenize in TOKENIZERS.items():
        conn.execute(
            f"CREATE VIRTUAL TABLE {name} USING fts5(title, heading, body, tokenize = '{tokenize}')"
        )
        with conn:
            conn.executemany(
                f"INSERT INTO {name}(rowid, title, heading, body) VALUES (?,?,?,?)", rows
            )
    return conn


_WORD = re.compile(r"[^\W_]")


def fts_query(text: str, op: str = "OR", split: str = "space") -> str:
    tokens = text.split() if split == "space" else re.findall(r"\w+", text)
    # as the engine does: terms with a token character, de-duplicated case-insensitively
    unique: dict[str, str] = {}
    for token in tokens:
        if _WORD.search(token):
            unique.setdefault(token.casefold(), token)
    quoted = ['"' + t.replace('"', '""') + '"' for t in unique.values()]
    return f" {op} ".join(quoted)


def lexical(
    conn: apsw.Connection,
    table: str,
    text: str,
    *,
    weights: tuple[float, float, float] = (1.0, 1.0, 1.0),
    op: str = "OR",
    split: str = "space",
    depth: int = 1000,
) -> Ranking:
    match = fts_query(text, op, split)
    if not match:
        return []
    w = ", ".join(str(x) for x in weights)
    sql = (
        f"SELECT rowid, bm25({table}, {w}) AS s FROM {table} WHERE {table} MATCH ? "
        "ORDER BY s LIMIT ?"
    )
    return [(row, -score) for row, score in conn.execute(sql, (match, depth))]


def dense(vectors: np.ndarray, query: np.ndarray, depth: int = 1000) -> Ranking:
    sims = vectors @ query
    depth = min(depth, len(sims))
    top = np.argpartition(-sims, depth - 1)[:depth]
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(int(i), float(sims[i])) for i in top]


def to_docs(ranking: Ranking, doc_of_row: Sequence[str], limit: int | None = None) -> list[str]:
    """Chunk ranking -> BEIR ids, a document where its best chunk is; ``limit`` chunks first."""
    docs: list[str] = []
    seen: set[str] = set()
    for row, _score in ranking[:limit]:
        doc = doc_of_row[row]
        if doc not in seen:
            seen.add(doc)
            docs.append(doc)
    return docs


def doc_level(ranking: Ranking, doc_of_row: Sequence[str]) -> list[tuple[str, float]]:
    """Max-pool a chunk ranking to documents (keeps each document's best chunk score)."""
    best: dict[str, float] = {}
    for row, score in ranking:
        doc = doc_of_row[row]
        if doc not in best:
            best[doc] = score
    return list(best.items())


def minmax(ranking: Sequence[tuple[object, float]]) -> dict[object, float]:
    if not ranking:
        return {}
    scores = [s for _k, s in ranking]
    low, high = min(scores), max(scores)
    span = high - low
    return {key: (s - low) / span if span > 0 else 1.0 for key, s in ranking}


def fuse_alpha(lex: Sequence, sem: Sequence, alpha: float) -> list:
    """alpha * minmax(lexical) + (1 - alpha) * minmax(semantic); a missing channel counts 0."""
    a, b = minmax(lex), minmax(sem)
    keys = dict.fromkeys([*a, *b])
    fused = {k: alpha * a.get(k, 0.0) + (1 - alpha) * b.get(k, 0.0) for k in keys}
    return sorted(fused.items(), key=lambda kv: -kv[1])


def max_norm(ranking: Sequence[tuple[object, float]]) -> dict[object, float]:
    top = max((s for _k, s in ranking), default=0.0)
    return {key: s / top if top > 0 else 1.0 for key, s in ranking}


def z_norm(ranking: Sequence[tuple[object, float]]) -> dict[object, float]:
    scores = np.array([s for _k, s in ranking], dtype=float)
    if len(scores) < 2 or scores.std() == 0:
        return {key: 0.0 for key, _s in ranking}
    mean, std = scores.mean(), scores.std()
    return {key: (s - mean) / std for key, s in ranking}


def fuse_norm(lex: Sequence, sem: Sequence, alpha: float, norm: Callable, floor: float) -> list:
    """Hybrid with another normalisation; a missing channel counts ``floor``."""
    a, b = norm(lex), norm(sem)
    keys = dict.fromkeys([*a, *b])
    fused = {k: alpha * a.get(k, floor) + (1 - alpha) * b.get(k, floor) for k in keys}
    return sorted(fused.items(), key=lambda kv: -kv[1])


def fuse_rrf(lex: Sequence, sem: Sequence, k: float, w_lex: float = 1.0) -> list:
    fused: dict[object, float] = {}
    for weight, ranking in ((w_lex, lex), (1.0, sem)):
        for rank, (key, _s) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda kv: -kv[1])


@dataclass
class Bench:
    data: BeirDataset
    corpus: Corpus
    fts: apsw.Connection
    qvecs: np.ndarray

    def score(self, runs: dict[str, list[str]]) -> dict[str, float]:
        return evaluate_run(runs, self.data.qrels)

    def run_chunks(self, rank: Callable[[int, str], Ranking], limit: int | None = None) -> dict:
        return {
            q.id: to_docs(rank(i, q.text), self.corpus.doc_of_row, limit)
            for i, q in enumerate(self.data.queries)
        }


def row(label: str, metrics: dict[str, float], extra: str = "") -> str:
    return (
        f"{label:<52} {metrics['ndcg@10']:.4f}  {metrics['recall@10']:.4f}  "
        f"{metrics['recall@100']:.4f}  {metrics['mrr@10']:.4f} {extra}"
    )


def header(title: str) -> None:
    print(f"\n## {title}\n{'config':<52} nDCG@10 R@10    R@100   MRR@10", flush=True)


def _lex(b: Bench, _index: int, text: str, **kwargs: object) -> Ranking:
    return lexical(b.fts, text=text, **kwargs)  # type: ignore[arg-type]


def section_lexical(b: Bench) -> None:
    header("lexical: tokenizer, combination, splitting")
    for table in TOKENIZERS:
        for op in ("OR", "AND"):
            for split in ("space", "word"):
                m = b.score(b.run_chunks(partial(_lex, b, table=table, op=op, split=split)))
                print(row(f"{table} {op} split={split}", m), flush=True)
    header("lexical: column weights (title, heading, body), porter OR")
    for weights in [
        (1, 1, 1), (0, 0, 1), (0.5, 0.5, 1), (2, 1, 1), (2, 0, 1), (3, 0, 1), (1, 0, 1),
        (2, 2, 1), (5, 0, 1), (10, 0, 1), (0.5, 0, 1),
    ]:  # fmt: skip
        m = b.score(b.run_chunks(partial(_lex, b, table="porter", weights=weights)))
        print(row(f"weights {weights}", m), flush=True)


def section_dense(b: Bench) -> None:
    header("semantic: exact cosine over chunk vectors")
    m = b.score(b.run_chunks(lambda i, t: dense(b.corpus.vectors, b.qvecs[i])))
    print(row("dense exact, best chunk per document", m))
    m = b.score(b.run_chunks(lambda i, t: dense(b.corpus.vectors, b.qvecs[i]), limit=100))
    print(row("dense exact, first 100 chunks only", m))


def _channels(b: Bench, weights: tuple[float, float, float], depth: int) -> list:
    out = []
    for i, q in enumerate(b.data.queries):
        lex = lexical(b.fts, "porter", q.text, weights=weights, depth=depth)
        sem = dense(b.corpus.vectors, b.qvecs[i], depth)
        out.append((q.id, lex, sem))
    return out


def fused_run(
    b: Bench, channels: list, fuse: Callable[[list, list], list], level: str, limit: int | None
) -> dict[str, list[str]]:
    runs = {}
    for qid, lex, sem in channels:
        if level == "doc":
            fused = fuse(doc_level(lex, b.corpus.doc_of_row), doc_level(sem, b.corpus.doc_of_row))
            runs[qid] = [doc for doc, _s in fused][: limit or None]
        else:
            runs[qid] = to_docs(fuse(lex, sem), b.corpus.doc_of_row, limit)
    return runs


def section_hybrid(b: Bench, weights: tuple[float, float, float], depth: int) -> None:
    channels = _channels(b, weights, depth)
    for level in ("chunk", "doc"):
        header(f"hybrid (min-max, alpha = lexical weight), {level}-level fusion, depth {depth}")
        for alpha in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0):
            m = b.score(fused_run(b, channels, partial(fuse_alpha, alpha=alpha), level, None))
            print(row(f"alpha {alpha}", m), flush=True)
    for level in ("chunk", "doc"):
        header(f"rrf, {level}-level fusion, depth {depth}")
        for k in (1, 5, 10, 20, 30, 60, 100, 200):
            m = b.score(fused_run(b, channels, partial(fuse_rrf, k=k), level, None))
            print(row(f"rrf_k {k}", m), flush=True)
        for w in (0.5, 0.75, 1.5, 2.0):
            m = b.score(fused_run(b, channels, partial(fuse_rrf, k=60, w_lex=w), level, None))
            print(row(f"rrf_k 60, lexical weight {w}", m), flush=True)


def section_norm(b: Bench, weights: tuple[float, float, float], depth: int) -> None:
    header(f"hybrid normalisation variants, chunk-level, depth {depth}")
    channels = _channels(b, weights, depth)
    variants = {"min-max (engine)": (minmax, 0.0), "divide by max": (max_norm, 0.0),
                "z-score, missing -3": (z_norm, -3.0)}  # fmt: skip
    for name, (norm, floor) in variants.items():
        for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
            fuse = partial(fuse_norm, alpha=alpha, norm=norm, floor=floor)
            print(
                row(f"{name}, alpha {alpha}", b.score(fused_run(b, channels, fuse, "chunk", None)))
            )


def query_ceiling(conn: apsw.Connection, table: str, text: str) -> float:
    """The sum of FTS5's idf over the query's phrases, with FTS5's N and n (the engine's
    ceiling: a chunk of average length holding each phrase once scores exactly this)."""
    phrases = [p for p in fts_query(text).split(" OR ") if p]
    rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    total = 0.0
    for phrase in phrases:
        n = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (phrase,))
        total += idf(rows, n.fetchone()[0])
    return total


def idf(rows: int, containing: int) -> float:
    value = float(np.log((rows - containing + 0.5) / (containing + 0.5)))
    return 1e-6 if value <= 0.0 else value


def fuse_scaled(
    lex: Sequence, sem: Sequence, alpha: float, lex_norm: Callable, sem_norm: Callable
) -> list:
    """alpha * lex_norm(lexical) + (1 - alpha) * sem_norm(semantic); a missing channel is 0."""
    a, b = lex_norm(lex), sem_norm(sem)
    keys = dict.fromkeys([*a, *b])
    fused = {k: alpha * a.get(k, 0.0) + (1 - alpha) * b.get(k, 0.0) for k in keys}
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def against(ceiling: float, floor_share: float = 1.0) -> Callable:
    """Lexical scores divided by max(best score, floor_share * ceiling)."""

    def norm(ranking: Sequence[tuple[object, float]]) -> dict[object, float]:
        if not ranking:
            return {}
        top = max(max(s for _k, s in ranking), floor_share * ceiling)
        return {key: s / top if top > 0 else 0.0 for key, s in ranking}

    return norm


def minmax_scaled(ceiling: float, weak_share: float = 1.0) -> Callable:
    """min-max, times the channel's strength min(1, best / (weak_share * ceiling)) (the
    engine's keyword normalisation with weak_share = ranking.WEAK_KEYWORD_SHARE)."""

    def norm(ranking: Sequence[tuple[object, float]]) -> dict[object, float]:
        if not ranking:
            return {}
        best = max(s for _k, s in ranking)
        strength = min(1.0, best / (weak_share * ceiling)) if ceiling > 0 else 1.0
        return {key: v * strength for key, v in minmax(ranking).items()}

    return norm


def over_best(ranking: Sequence[tuple[object, float]]) -> dict[object, float]:
    """max(cosine, 0) / best cosine (0 if none is > 0)."""
    top = max((s for _k, s in ranking), default=0.0)
    return {key: max(s, 0.0) / top if top > 0 else 0.0 for key, s in ranking}


def section_fusion(b: Bench, weights: tuple[float, float, float], depth: int) -> None:
    """Normalisations that keep a channel's weak evidence weak: a lone keyword candidate that
    matches one common word of a question must not get the keyword channel's full weight."""
    channels = _channels(b, weights, depth)
    ceilings = {q.id: query_ceiling(b.fts, "porter", q.text) for q in b.data.queries}
    ratios = np.array([lex[0][1] / ceilings[qid] if lex else 0.0 for qid, lex, _ in channels])
    print(
        f"\nbest bm25 / ceiling: quantiles 0, 10, 50, 90% {np.quantile(ratios, [0, 0.1, 0.5, 0.9])}"
    )
    print(
        f"queries below 1/4, 1/2, 1 of the ceiling: {[(ratios < x).sum() for x in (0.25, 0.5, 1)]}"
    )
    variants: dict[str, Callable[[float], tuple[Callable, Callable]]] = {
        "min-max / min-max (before)": lambda c: (minmax, minmax),
        "min-max * strength at 1/4 ceiling (engine)": lambda c: (minmax_scaled(c, 0.25), minmax),
        "min-max * strength at 1/3 ceiling": lambda c: (minmax_scaled(c, 1 / 3), minmax),
        "min-max * strength at 1/2 ceiling": lambda c: (minmax_scaled(c, 0.5), minmax),
        "min-max * strength at the ceiling": lambda c: (minmax_scaled(c, 1.0), minmax),
        "lex / max(best, ceiling), min-max": lambda c: (against(c), minmax),
        "lex / max(best, ceiling/2), min-max": lambda c: (against(c, 0.5), minmax),
        "lex / max(best, ceiling), cos / best": lambda c: (against(c), over_best),
        "lex / best, cos / best": lambda c: (max_norm, over_best),
    }
    header(f"hybrid fusion variants (lexical, semantic normalisation), depth {depth}")
    at_half: dict[str, dict[str, list[str]]] = {}
    for name, make in variants.items():
        for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
            runs = {}
            for qid, lex, sem in channels:
                lex_norm, sem_norm = make(ceilings[qid])
                fused = fuse_scaled(lex, sem, alpha, lex_norm, sem_norm)
                runs[qid] = to_docs(fused, b.corpus.doc_of_row, limit=100)  # as the service
            print(row(f"{name}, alpha {alpha}", b.score(runs)), flush=True)
            if alpha == 0.5:
                at_half[name] = runs
    print("\n## paired nDCG@10 differences at alpha 0.5 (95% interval)")
    before = at_half["min-max / min-max (before)"]
    for name, runs in at_half.items():
        if runs is not before:
            paired(b, f"{name}  vs  min-max", runs, before)


def section_depth(b: Bench, weights: tuple[float, float, float], alpha: float, k: int) -> None:
    header(f"candidate depth per channel (alpha {alpha}, rrf_k {k}, chunk-level)")
    for depth in (10, 20, 50, 100, 200, 300, 500, 1000):
        channels = _channels(b, weights, depth)
        mh = b.score(fused_run(b, channels, partial(fuse_alpha, alpha=alpha), "chunk", None))
        mr = b.score(fused_run(b, channels, partial(fuse_rrf, k=k), "chunk", None))
        print(row(f"depth {depth} hybrid", mh))
        print(row(f"depth {depth} rrf", mr), flush=True)
    header("limit 100 chunk results (what the service returns) vs unlimited, depth 300")
    channels = _channels(b, weights, 300)
    for limit in (None, 100):
        mh = b.score(fused_run(b, channels, partial(fuse_alpha, alpha=alpha), "chunk", limit))
        print(row(f"hybrid, chunk limit {limit}", mh), flush=True)


def paired(b: Bench, label: str, run_a: dict, run_b: dict) -> None:
    """Mean per-query nDCG@10 difference (a - b) with a 95% interval (normal approximation)."""
    diffs = np.array(
        [
            ndcg_at_k(run_a.get(q, []), grades) - ndcg_at_k(run_b.get(q, []), grades)
            for q, grades in b.data.qrels.items()
        ]
    )
    se = diffs.std(ddof=1) / np.sqrt(len(diffs))
    print(f"{label:<66} {diffs.mean():+.4f} +- {1.96 * se:.4f}", flush=True)


def section_noise(b: Bench, weights: tuple[float, float, float], depth: int) -> None:
    print("\n## paired nDCG@10 differences over the queries (95% interval)")
    channels = _channels(b, weights, depth)
    runs = {
        f"hybrid {a}": fused_run(b, channels, partial(fuse_alpha, alpha=a), "chunk", None)
        for a in (0.4, 0.5, 0.6)
    }
    runs |= {
        f"rrf {k}": fused_run(b, channels, partial(fuse_rrf, k=k), "chunk", None) for k in (5, 60)
    }
    runs["lexical"] = {qid: to_docs(lex, b.corpus.doc_of_row) for qid, lex, _s in channels}
    runs["semantic"] = {qid: to_docs(sem, b.corpus.doc_of_row) for qid, _l, sem in channels}
    runs["hybrid 0.5 doc-level"] = fused_run(
        b, channels, partial(fuse_alpha, alpha=0.5), "doc", None
    )
    heavy = _channels(b, (2.0, 1.5, 1.0), depth)
    runs["lexical (2, 1.5, 1)"] = {qid: to_docs(lex, b.corpus.doc_of_row) for qid, lex, _ in heavy}
    for a, c in [
        ("hybrid 0.5", "rrf 60"), ("hybrid 0.5", "lexical"), ("hybrid 0.5", "semantic"),
        ("hybrid 0.5", "hybrid 0.4"), ("hybrid 0.5", "hybrid 0.6"), ("rrf 5", "rrf 60"),
        ("hybrid 0.5 doc-level", "hybrid 0.5"), ("lexical", "lexical (2, 1.5, 1)"),
    ]:  # fmt: skip
        paired(b, f"{a}  vs  {c}", runs[a], runs[c])


def query_vectors(data: BeirDataset, cache: Path) -> np.ndarray:
    if cache.is_file():
        vecs = np.load(cache)
        if len(vecs) == len(data.queries):
            return vecs
    from kbmcp.embed.minilm import MiniLMEmbedder

    vecs = MiniLMEmbedder().embed([q.text for q in data.queries])
    np.save(cache, vecs)
    return vecs


def parse_weights(text: str) -> tuple[float, float, float]:
    parts = tuple(float(x) for x in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("weights are title,heading,body")
    return parts  # type: ignore[return-value]


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--dataset", type=Path, default=SCIFACT)
    parser.add_argument("--kb", default=None)
    parser.add_argument("--section", default="lexical,dense,hybrid,depth")
    parser.add_argument("--weights", type=parse_weights, default=(1.0, 1.0, 1.0))  # engine
    parser.add_argument("--depth", type=int, default=100)  # engine default
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--rrf-k", type=int, default=60)
    args = parser.parse_args(None if argv is None else list(argv))
    started = time.perf_counter()
    data = load_beir(args.dataset)
    corpus = load_corpus(args.db, args.kb or f"beir-{args.dataset.resolve().name}", data.files)
    docs = len(set(corpus.doc_of_row))
    chunks = len(corpus.doc_of_row)
    print(f"{args.db}: {chunks} chunks of {docs} documents; {len(data.queries)} queries")
    qvecs = query_vectors(data, args.db.parent / f"{args.dataset.resolve().name}-queries.npy")
    bench = Bench(data, corpus, build_fts(corpus), qvecs)
    sections = set(args.section.split(","))
    if "lexical" in sections:
        section_lexical(bench)
    if "dense" in sections:
        section_dense(bench)
    if "hybrid" in sections:
        section_hybrid(bench, args.weights, args.depth)
    if "norm" in sections:
        section_norm(bench, args.weights, args.depth)
    if "noise" in sections:
        section_noise(bench, args.weights, args.depth)
    if "fusion" in sections:
        section_fusion(bench, args.weights, args.depth)
    if "depth" in sections:
        section_depth(bench, args.weights, args.alpha, args.rrf_k)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
