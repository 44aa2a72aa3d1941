"""Search latency and recall at 100k chunks: `python bench/search.py [--chunks N] [--queries Q]`.

Builds a synthetic corpus in a temp file (realistic shape, not real prose):
- text: Zipfian word frequencies (s=1.07) over English function words followed by ~40k
  pronounceable pseudo-words, plus per-document topic words, ~90 words per chunk,
  `--chunks-per-doc` chunks per document (default 10; 1 is the shape of notes, tickets, abstracts
  and memories: as many documents as chunks);
- vectors: the hashing embedder's exact output for each chunk (computed in bulk from per-word
  vectors, which is what the hashing embedder sums), 384-d;
- scopes: path prefixes holding 0.1%, 1% and 10% of the chunks;
- queries: 8-15 words, mostly drawn from one chunk inside the scope, mixed with function words,
  like a natural-language question;
- memories (`--memories N`, default none): N short memories of 10-40 words drawn like the chunks'
  words (one chunk each, the same exact hashing-embedder vectors) in one memory store of the same
  tenant, added after the documents, also to a reused `--db` file (only the ones it lacks: the
  file keeps them, and N smaller than the file's count is an error rather than a mislabelled
  run). The queries and scopes stay the documents' ones; searches cover both kinds, as by
  default (a memory matches no path, tag or metadata scope of the bench, but path and metadata
  filters are document-only, so those scopes keep every memory). `--documents-only` runs every
  cell with include_memories=False: the documents' numbers, to compare with a file without
  memories.

For every mode, scope and `--limits` k it prints p50/p95 latency of `search()` (query embeddings
are precomputed: embedding time is excluded) and recall@k against exact brute force: the same
request with every approximation switched off (exact vector scan over the whole scope, no
stop-word pruning), over the same kinds (documents and memories) as the measured request
(`--no-recall`: timings only, for before/after comparisons). With memories in the file a column
gives the share of returned results that are memories.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import apsw
import numpy as np

from kbmcp.clock import now_iso
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder, _hash_feature, text_features
from kbmcp.search.lexical import channel
from kbmcp.search.models import MODES, SearchFilters, SearchRequest
from kbmcp.service.ingest_batch import sha256
from kbmcp.service.search import search
from kbmcp.store.catalog import MEMORIES, dump_json
from kbmcp.store.postgres.url import is_postgres_url
from kbmcp.store.sqlite.catalog import ensure_knowledge_base, ensure_tenant, find_knowledge_base
from kbmcp.store.sqlite.id_key import id_key_of
from kbmcp.store.sqlite.index import IndexRow, add_to_index
from kbmcp.store.sqlite.vectors import record_model, store_vectors
from kbmcp.workspace import Workspace

if TYPE_CHECKING:
    from vector_shape import ShapeGenerator

DIM = 384
CHUNKS_PER_DOC = 10  # the default shape
WORDS_PER_CHUNK = (60, 120)
WORDS_PER_MEMORY = (10, 41)  # numpy's high end is exclusive: 10-40 words
MEMORY_STORE = "bench-memories"
SCOPES = {"0.1%": 0.001, "1%": 0.01, "10%": 0.10}
VECTORS_OF = {True: "hashing", False: "shaped"}  # by "the corpus draws no shaped vectors"
DEFAULT_SHAPE = Path.home() / ".cache" / "kbmcp-bench" / "shape-model.npz"
# What a search's time is measured with: wall time (what a caller waits), or the process's CPU
# time (the engine's own work, much less disturbed when other processes load the machine).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
COUNT_BENCH_DOCUMENTS = """
SELECT count(*) FROM document AS d JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.name = 'bench' AND kb.kind = 'documents'
"""
# The text of the first chunk of the bench document at a path (a reused file's check).
FIRST_CHUNK_TEXT = """
SELECT c.text
FROM document AS d
JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
JOIN chunk AS c ON c.revision_id = d.current_revision_id AND c.ordinal = 0
WHERE kb.name = 'bench' AND kb.kind = 'documents' AND d.path = {path}
"""
# The vector of the file's first chunk (a bench file's first chunk is the corpus's).
FIRST_STORED_VECTOR = "SELECT embedding FROM chunk_vector ORDER BY chunk_id LIMIT 1"
FUNCTION_WORDS = (  # noqa: SIM905 - a word list reads better as text
    "the of and to a in is that for it as with was on be by this are or from at an which have "
    "not but can all will more one has their there been if when also into other its only may "
    "some these than what about how use used each then such between both through after over "
    "does do i we you should why where most new first"
).split()
VOCABULARY_SIZE = 40_000  # the function words and made-up words
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """The function words, then made-up words of 2-4 syllables. Syllables are drawn by index
    (`rng.choice(len(SYLLABLES), n)` draws what `rng.choice(SYLLABLES, n)` does, without
    turning the list into an array per word: most of a corpus's start-up)."""
    words = dict.fromkeys(FUNCTION_WORDS)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words["".join([SYLLABLES[i] for i in rng.choice(len(SYLLABLES), n).tolist()])] = None
    return list(words)


def word_vectors(words: Sequence[str]) -> np.ndarray:
    """Unnormalised hashing-embedder vector of each word (the embedder sums these)."""
    out = np.zeros((len(words), DIM), dtype=np.float32)
    for i, word in enumerate(words):
        hashes = np.fromiter((_hash_feature(f) for f in text_features(word)), dtype=np.uint64)
        buckets = ((hashes >> np.uint64(1)) % np.uint64(DIM)).astype(np.intp)
        signs = np.where(hashes & np.uint64(1), 1.0, -1.0)
        out[i] = np.bincount(buckets, weights=signs, minlength=DIM)
    return out


class Corpus:
    def __init__(
        self,
        chunks: int,
        seed: int = 7,
        anisotropy: float = 0.0,
        chunks_per_doc: int = CHUNKS_PER_DOC,
        vocabulary_size: int = VOCABULARY_SIZE,
    ) -> None:
        """`anisotropy` > 0 adds a direction every vector shares (as real sentence-embedding
        models' vectors do: MiniLM's pairwise cosines of unrelated texts sit around 0.1-0.3)
        with that weight relative to a chunk's own unit vector."""
        rng = np.random.default_rng(seed)
        self.shared = rng.standard_normal(DIM).astype(np.float32)
        self.shared /= np.linalg.norm(self.shared)
        self.anisotropy = anisotropy
        self.words = vocabulary(rng, vocabulary_size)
        ranks = np.arange(1, len(self.words) + 1)
        self.p = ranks**-1.07 / np.sum(ranks**-1.07)
        # rng.choice(len(words), n, p=self.p) draws exactly these (numpy's own steps), without
        # re-checking and summing p on every call (most of a 1M-chunk build's time).
        self.cdf = np.cumsum(self.p)
        self.cdf /= self.cdf[-1]
        self.chunks_per_doc = chunks_per_doc
        self.docs = chunks // chunks_per_doc
        self.rng = rng
        self.topics = [rng.integers(200, len(self.words), 40) for _ in range(300)]
        self.vectors_of_words = word_vectors(self.words)
        self.shaped: ShapeGenerator | None = None  # set by `with_vectors`
        self.query_rows: dict[str, int] = {}  # each query's source chunk (make_queries)

    def with_vectors(self, shape: Path | None) -> Corpus:
        """Draw the chunks' vectors from the model of real vectors in `shape` (a file
        bench/vector_shape.py wrote) instead of the hashing embedder; None: hashing."""
        if shape is not None:
            from vector_shape import ShapeGenerator, ShapeModel  # bench/, beside this file

            self.shaped = ShapeGenerator(ShapeModel.load(shape), self.docs * self.chunks_per_doc)
        return self

    def query_vectors(self, queries: Sequence[str]) -> np.ndarray | None:
        """Shaped vectors: each query a new row of its source chunk's cluster (a question
        about that chunk); None with hashing vectors (the queries' own hashing vectors)."""
        if self.shaped is None:
            return None
        return self.shaped.near([self.query_rows.get(q, 0) for q in queries])

    def chunk_words(
        self,
        doc: int,
        rng: np.random.Generator | None = None,
        length: tuple[int, int] = WORDS_PER_CHUNK,
    ) -> np.ndarray:
        """Word ids of one chunk of document `doc` (its topic's words mixed into Zipfian
        background words); `rng` defaults to the corpus's own sequence."""
        rng = rng or self.rng
        n = int(rng.integers(*length))
        background = self.cdf.searchsorted(rng.random(n), side="right").astype(np.int64)
        topic = self.topics[doc % len(self.topics)]
        mask = rng.random(n) < 0.25
        background[mask] = rng.choice(topic, int(mask.sum()))
        return background

    def title(self, doc: int) -> str:
        return f"Document {doc}"

    def embed_many(self, word_ids: Sequence[np.ndarray], first_row: int) -> np.ndarray:
        """The vectors of chunks `first_row`, `first_row + 1`, ... (their words `word_ids`):
        the hashing embedder's, or rows drawn from a model of real vectors (`shaped`)."""
        if self.shaped is not None:
            return self.shaped.row_range(first_row, len(word_ids))[0]
        out = np.zeros((len(word_ids), DIM), dtype=np.float32)
        for i, ids in enumerate(word_ids):
            vector = self.vectors_of_words[ids].sum(axis=0)
            norm = np.linalg.norm(vector)
            vector = vector / norm if norm else vector
            if self.anisotropy:
                vector = vector + self.anisotropy * self.shared
                vector /= np.linalg.norm(vector)
            out[i] = vector
        return out

    def text(self, ids: np.ndarray) -> str:
        return " ".join(self.words[i] for i in ids)


def corpus_of(args: argparse.Namespace) -> Corpus:
    """The corpus the command line describes (each run draws the same one)."""
    shape = args.shape if args.vectors == "shaped" else None
    if args.corpus == "scifact":
        if args.dataset is None:
            raise SystemExit("--corpus scifact needs --dataset (a BEIR SciFact folder)")
        return RealTextCorpus(args.chunks, args.dataset).with_vectors(shape)
    return Corpus(args.chunks, anisotropy=args.anisotropy, chunks_per_doc=args.chunks_per_doc,
                  vocabulary_size=args.vocabulary).with_vectors(shape)  # fmt: skip


class RealTextCorpus(Corpus):
    """One-chunk documents of real text: document i carries abstract i mod 5,183 of a BEIR
    SciFact folder (its title and text), the shape of notes, tickets and abstracts with real
    vocabulary and real sentence lengths. A chunk's "words" are one id, its abstract's; the
    queries are SciFact's claims (long natural-language questions), each about the abstracts
    it cites (its vector, with shaped vectors, a new row of the first cited abstract's cluster).
    """

    def __init__(self, chunks: int, dataset: Path) -> None:
        from kbmcp.eval.beir import load_beir

        loaded = load_beir(dataset)
        self.abstracts = [(d.title, d.text) for d in loaded.corpus]
        position = {d.id: i for i, d in enumerate(loaded.corpus)}
        self.claims = [q.text for q in loaded.queries]
        self.cited = [min(position[d] for d in loaded.qrels.get(q.id, {}) if d in position)
                      for q in loaded.queries]  # fmt: skip
        self.chunks_per_doc = 1
        self.docs = chunks
        self.anisotropy = 0.0
        self.words = []  # no vocabulary: the reuse check's flag (--vocabulary) does not apply
        self.rng = np.random.default_rng(7)
        self.shaped = None
        self.query_rows = {}

    def chunk_words(self, doc: int, rng: np.random.Generator | None = None,
                    length: tuple[int, int] = WORDS_PER_CHUNK) -> np.ndarray:  # fmt: skip
        return np.asarray([doc % len(self.abstracts)])

    def title(self, doc: int) -> str:
        return self.abstracts[doc % len(self.abstracts)][0]

    def text(self, ids: np.ndarray) -> str:
        return self.abstracts[int(ids[0])][1]

    def embed_many(self, word_ids: Sequence[np.ndarray], first_row: int) -> np.ndarray:
        if self.shaped is not None:
            return self.shaped.row_range(first_row, len(word_ids))[0]
        return HashingEmbedder(DIM).embed([self.text(ids) for ids in word_ids])

    def questions(self, count: int, seed: int) -> list[str]:
        """`count` claims: seed 11 (measured) from the first, others (warm-up) from the last."""
        order = range(len(self.claims)) if seed == 11 else reversed(range(len(self.claims)))
        chosen = [i for _, i in zip(range(count), itertools.cycle(order), strict=False)]
        for i in chosen:
            self.query_rows[self.claims[i]] = self.cited[i]
        return [self.claims[i] for i in chosen]


def path_of(doc: int, docs: int) -> str:
    """Scope prefixes: the first 0.1% of documents are s0001/, the next 1% s001/, ..."""
    bounds, start = [], 0
    for name, fraction in SCOPES.items():
        count = max(1, round(docs * fraction))
        bounds.append((start, start + count, name))
        start += count
    for low, high, name in bounds:
        if low <= doc < high:
            return f"{scope_prefix(name)}doc{doc:06d}.md"
    return f"rest/doc{doc:06d}.md"


def scope_prefix(name: str) -> str:
    return "s" + name.rstrip("%").replace(".", "") + "/"


def corpus_documents(corpus: Corpus) -> Iterator[CorpusDocument]:
    """The corpus's documents in order, drawn from its generator (the same in every run)."""
    for doc in range(corpus.docs):
        path = path_of(doc, corpus.docs)
        chunk_words = [corpus.chunk_words(doc) for _ in range(corpus.chunks_per_doc)]
        scope = next((n for n in SCOPES if path.startswith(scope_prefix(n))), "unscoped")
        # The same scopes as tags and metadata: {"bucket": "s01"} / tag bucket=s01.
        bucket = scope_prefix(scope).rstrip("/") if scope != "unscoped" else "rest"
        ordinal = int(corpus.rng.integers(corpus.chunks_per_doc))
        sample = Sample(chunk_words[ordinal], doc * corpus.chunks_per_doc + ordinal)
        yield CorpusDocument(doc, path, bucket, chunk_words, scope, sample)


class Sample(NamedTuple):
    """A chunk that queries are drawn from: its word ids and its row (chunk number)."""

    words: np.ndarray
    row: int


@dataclass(frozen=True)
class CorpusDocument:
    doc: int
    path: str
    bucket: str
    chunk_words: list[np.ndarray]
    scope: str  # a SCOPES name or "unscoped"
    sample: Sample  # one of its chunks (queries are drawn from samples)


def samples_of(documents: Iterable[CorpusDocument]) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {name: [] for name in [*SCOPES, "unscoped"]}
    for document in documents:
        samples[document.scope].append(document.sample)
    return samples


def first_chunk(corpus: Corpus) -> tuple[str, str, np.ndarray]:
    """The path of the corpus's first document, the text of its first chunk and that chunk's
    vector, drawn by a generator of its own (the corpus's own sequence is not advanced)."""
    if isinstance(corpus, RealTextCorpus):
        words = corpus.chunk_words(0)
        return path_of(0, corpus.docs), corpus.text(words), corpus.embed_many([words], 0)[0]
    fresh = Corpus(
        corpus.docs * corpus.chunks_per_doc,
        anisotropy=corpus.anisotropy,
        chunks_per_doc=corpus.chunks_per_doc,
        vocabulary_size=len(corpus.words),
    )
    fresh.shaped = corpus.shaped
    document = next(corpus_documents(fresh))
    words = document.chunk_words[0]
    return document.path, fresh.text(words), fresh.embed_many([words], 0)[0]


def check_built_alike(
    conn: Any, placeholder: str, corpus: Corpus, where: str, vectors_sql: str | None = None
) -> None:
    """Exit with a clear message unless the reused corpus `conn` reads (an SQLite file or a
    PostgreSQL database, whose driver writes parameters as `placeholder`) was built from this
    command line's corpus: queries drawn from another vocabulary would find nothing they were
    drawn from, and the recall reference would be another corpus's. `vectors_sql`: the
    statement reading the first chunk's vector (float32 bytes), also compared (another
    --vectors would search other neighbourhoods). `first_chunk` once: it draws a corpus (~3 s
    at 100k chunks)."""
    path, text, vector = first_chunk(corpus)
    row = conn.execute(FIRST_CHUNK_TEXT.format(path=placeholder), (path,)).fetchone()
    if (row and row[0]) != text:
        raise SystemExit(
            f"{where} was built from another corpus (its first chunk differs): give the "
            "--corpus, --vocabulary and --chunks-per-doc it was built with, or build a new one"
        )
    if vectors_sql is None:
        return
    stored = conn.execute(vectors_sql).fetchone()
    value = None if stored is None else stored[0]
    if not isinstance(value, bytes | memoryview | None):  # PostgreSQL: real[]
        value = np.asarray(value, dtype="<f4").tobytes()
    if value is None or bytes(value) != np.asarray(vector, dtype="<f4").tobytes():
        raise SystemExit(
            f"{where} holds other vectors than --vectors {VECTORS_OF[corpus.shaped is None]} "
            "draws: give the --vectors and --shape it was built with, or replace them "
            "(--revector, PostgreSQL)"
        )


def cached_samples(db_path: Path, corpus: Corpus) -> dict[str, list[Sample]]:
    """The samples of a file built earlier, kept beside it
    (`FILE.samples-DOCSxCHUNKS-vVOCABULARY.pkl`): regenerating them walks the whole generator,
    ~40 s of CPU at 100k chunks on every reuse, which is most of a short timing run's wall time
    on a busy machine."""
    kind = "scifact" if isinstance(corpus, RealTextCorpus) else f"v{len(corpus.words)}"
    name = f"{db_path.name}.samples2-{corpus.docs}x{corpus.chunks_per_doc}-{kind}"
    path = db_path.with_name(f"{name}.pkl")
    if path.exists():
        with path.open("rb") as handle:
            return pickle.load(handle)
    samples = samples_of(corpus_documents(corpus))
    with path.open("wb") as handle:
        pickle.dump(samples, handle)
    return samples


def build(ws: Workspace, corpus: Corpus, write: bool = True) -> dict[str, list[Sample]]:
    """Insert documents straight into the store (ingest's chunker/embedder would take an hour
    with a real model; the rows are the same). Returns sample chunk word-ids per scope.
    With write=False only the (deterministic) samples are regenerated for an existing file."""
    conn = ws.conn
    if not write:
        held = conn.execute(COUNT_BENCH_DOCUMENTS).fetchone()[0]
        if held != corpus.docs:
            raise SystemExit(
                f"{ws.settings.db_path} holds {held} documents, not the {corpus.docs} of "
                f"--chunks {corpus.docs * corpus.chunks_per_doc} --chunks-per-doc "
                f"{corpus.chunks_per_doc}: give the flags it was built with"
            )
        check_built_alike(conn, "?", corpus, str(ws.settings.db_path), FIRST_STORED_VECTOR)
        return cached_samples(Path(ws.settings.db_path), corpus)
    conn.execute("BEGIN IMMEDIATE")
    record_model(conn, HashingEmbedder().fingerprint)
    tenant = ensure_tenant(conn)
    kb = ensure_knowledge_base(conn, tenant, "bench")
    now = now_iso()
    written = []
    for document in corpus_documents(corpus):
        doc_public = id_key_of(conn).make("document", kb.public_id, document.path)
        insert_document(conn, corpus, kb.id, doc_public, document.path,
                        corpus.title(document.doc), document.chunk_words, now,
                        document.doc * corpus.chunks_per_doc, bucket=document.bucket)  # fmt: skip
        written.append(replace(document, chunk_words=[]))
    conn.execute("COMMIT")
    return samples_of(written)


def insert_document(
    conn: apsw.Connection,
    corpus: Corpus,
    kb_id: int,
    public_id: str,
    path: str,
    title: str,
    chunk_words: Sequence[np.ndarray],
    now: str,
    first_row: int,
    *,
    bucket: str | None = None,
) -> None:
    """One published document (or memory: a document of a memory store) with one revision whose
    chunks are `chunk_words` joined by blank lines, indexed with the hashing embedder's exact
    vectors: the rows ingest writes. `bucket`: also tag bucket=... and metadata {"bucket": ...}."""
    texts = [corpus.text(ids) for ids in chunk_words]
    content = "\n\n".join(texts)
    conn.execute(
        """INSERT INTO document (public_id, knowledge_base_id, path, title, kind, metadata,
           created_at, updated_at) VALUES (?, ?, ?, ?, 'text', ?, ?, ?)""",
        (public_id, kb_id, path, title, dump_json({"bucket": bucket} if bucket else {}), now,
         now),
    )  # fmt: skip
    document_id = conn.last_insert_rowid()
    if bucket:
        conn.execute(
            """INSERT INTO document_tag (document_id, key, value, knowledge_base_id)
               VALUES (?, 'bucket', ?, ?)""",
            (document_id, bucket, kb_id),
        )
    rev_public = id_key_of(conn).make("revision", public_id, 1)
    conn.execute(
        """INSERT INTO revision (public_id, document_id, number, content, content_hash,
           char_count, line_count, created_at) VALUES (?, ?, 1, ?, ?, ?, ?, ?)""",
        (rev_public, document_id, content, sha256(content), len(content), 2 * len(texts) - 1,
         now),
    )  # fmt: skip
    revision_id = conn.last_insert_rowid()
    conn.execute("UPDATE document SET current_revision_id = ? WHERE id = ?",
                 (revision_id, document_id))  # fmt: skip
    vectors = corpus.embed_many(chunk_words, first_row)
    rows, offset = [], 0
    for ordinal, text in enumerate(texts):
        conn.execute(
            """INSERT INTO chunk (public_id, revision_id, ordinal, heading_path, char_start,
               char_end, line_start, line_end, text) VALUES (?, ?, ?, '[]', ?, ?, ?, ?, ?)""",
            (id_key_of(conn).make("chunk", rev_public, ordinal), revision_id, ordinal, offset,
             offset + len(text), 2 * ordinal + 1, 2 * ordinal + 1, text),
        )  # fmt: skip
        offset += len(text) + 2
        rows.append(IndexRow(conn.last_insert_rowid(), (), text, vectors[ordinal].tobytes()))
    store_vectors(conn, [(r.chunk_id, r.embedding) for r in rows])
    add_to_index(conn, kb_id, title, rows)


def add_memories(ws: Workspace, corpus: Corpus, count: int, seed: int = 13) -> tuple[int, int]:
    """Make the bench's memory store hold `count` memories (written like `build`'s documents,
    one chunk each): adds the ones the file lacks. Memory i is the same text in every file (its
    own generator), so a file extended later matches one built at once. Returns (held, added)."""
    conn = ws.conn
    tenant = ensure_tenant(conn)
    store = find_knowledge_base(conn, tenant, MEMORY_STORE)
    held = 0
    if store is not None:
        held = conn.execute(
            "SELECT count(*) FROM document WHERE knowledge_base_id = ?", (store.id,)
        ).fetchone()[0]
    if held > count:
        raise SystemExit(
            f"{ws.settings.db_path} already holds {held} memories, more than --memories {count}: "
            "use a copy of the file without them"
        )
    if held == count:
        return held, 0
    conn.execute("BEGIN IMMEDIATE")
    store = ensure_knowledge_base(conn, tenant, MEMORY_STORE, kind=MEMORIES)
    now = now_iso()
    for i in range(held, count):
        words = corpus.chunk_words(i, np.random.default_rng([seed, i]), WORDS_PER_MEMORY)
        memory = id_key_of(conn).make("memory", store.public_id, i)
        insert_document(conn, corpus, store.id, memory, memory, "", [words], now, 0)
    conn.execute("COMMIT")
    return count, count - held


def make_queries(corpus: Corpus, samples: list[Sample], count: int, seed: int = 11) -> list[str]:
    """`count` questions: words of a sample chunk mixed with function words (the real-text
    corpus: its real questions). Each query's source chunk is kept in `corpus.query_rows`."""
    if isinstance(corpus, RealTextCorpus):
        return corpus.questions(count, seed)
    rng = np.random.default_rng(seed)
    queries = []
    for i in range(count):
        source = samples[i % len(samples)]
        n = int(rng.integers(8, 16))
        content = round(n * 0.6)
        words = list(rng.choice(source.words, content, replace=False))
        words += list(rng.choice(len(FUNCTION_WORDS), n - content))
        rng.shuffle(words)
        queries.append(" ".join(corpus.words[w] for w in words))
        corpus.query_rows.setdefault(queries[-1], source.row)
    return queries


class PrecomputedEmbedder(HashingEmbedder):
    """Query vectors computed up front, so timings exclude embedding."""

    def __init__(
        self,
        queries: Sequence[str],
        corpus: Corpus | None = None,
        given: dict[str, np.ndarray] | None = None,
    ) -> None:
        """`given`: vectors of some queries (real questions embedded by the real model)."""
        super().__init__(DIM)
        queries = list(dict.fromkeys(queries))
        shaped = corpus.query_vectors(queries) if corpus is not None else None
        vectors = shaped if shaped is not None else np.asarray(super().embed(queries), np.float32)
        if corpus is not None and corpus.anisotropy:  # queries share the corpus's direction too
            vectors = vectors + corpus.anisotropy * corpus.shared
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        self.cache = {q: v for q, v in zip(queries, vectors, strict=True)} | (given or {})

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.cache[t] for t in texts])


def queries_of(
    args: argparse.Namespace, corpus: Corpus, samples: dict[str, list[Sample]]
) -> tuple[dict[str, list[str]], dict[str, list[str]], PrecomputedEmbedder]:
    """The measured queries and the warm-up queries of each scope, and the embedder that
    knows their vectors: drawn from the corpus, or with --real-queries the real questions
    (the same ones in every scope) with their real vectors."""
    if args.real_queries:
        texts, vectors = real_questions()
        measured = texts[: args.queries]
        others = texts[args.queries :] or texts
        warm = [others[i % len(others)] for i in range(args.warmup)]
        embedder = PrecomputedEmbedder([], given=dict(zip(texts, vectors, strict=True)))
        return ({n: measured for n in samples}, {n: warm for n in samples}, embedder)
    queries = {name: make_queries(corpus, s, args.queries) for name, s in samples.items()}
    warmup = {name: make_queries(corpus, s, args.warmup, seed=12) for name, s in samples.items()}
    every = [q for qs in [*queries.values(), *warmup.values()] for q in qs]
    return queries, warmup, PrecomputedEmbedder(every, corpus)


def real_questions() -> tuple[list[str], np.ndarray]:
    """The real questions bench/real_vectors.py embedded (SciFact's claims, then the docs
    questions, in its order) and their vectors."""
    from real_vectors import DEFAULT_CACHE, find_cached, load_real  # bench/, beside this file

    real = load_real(find_cached(DEFAULT_CACHE, "queries"))
    return real.texts, real.vectors


@contextlib.contextmanager
def exact_everything() -> Iterator[None]:
    """Brute force (with a one-shot workspace): FTS5's own OR query over every term, no
    stop-word pruning; exact vector scores of every allowed row (vec_distance_cosine, or the
    vec0 KNN, itself a brute-force scan)."""
    saved = channel.STOPWORD_MIN_ROWS
    channel.STOPWORD_MIN_ROWS = 10**12
    try:
        yield
    finally:
        channel.STOPWORD_MIN_ROWS = saved


def run_cell(
    ws: Workspace,
    reference: Workspace,
    queries: list[str],
    mode: str,
    filters: SearchFilters,
    limit: int = 10,
    clock: Callable[[], float] = time.perf_counter,
    with_recall: bool = True,
) -> tuple[list[float], float, float]:
    """Latencies (ms), mean recall@k (k = `limit`; NaN without `with_recall`), and the share of
    returned results that are memories."""
    principal = ws.local_principal()
    timings, recalls = [], []
    returned = memories = 0
    for query in queries:
        request = SearchRequest(query, mode=mode, limit=limit, filters=filters)
        started = clock()
        got = search(ws, principal, request)
        timings.append((clock() - started) * 1000)
        returned += len(got.results)
        memories += sum(r.kind == "memory" for r in got.results)
        if not with_recall:
            continue
        with exact_everything():
            want = search(reference, principal, request)
        truth = {r.chunk_id for r in want.results}
        if truth:
            recalls.append(len(truth & {r.chunk_id for r in got.results}) / len(truth))
    recall = statistics.mean(recalls) if recalls else float("nan")
    return timings, recall, (memories / returned if returned else 0.0)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def make_cells(filters: str, kinds: dict[str, bool]) -> list[tuple[str, str, SearchFilters]]:
    """(label, sample scope, filters) of each measured cell: unscoped, then each scope kind of
    `filters` (path, tag, meta) at each size."""
    buckets = {name: scope_prefix(name).rstrip("/") for name in SCOPES}
    cells = [("unscoped", "unscoped", SearchFilters(**kinds))]
    for kind in filters.split(","):
        for name in SCOPES:
            chosen = {
                "path": SearchFilters(document_paths=[scope_prefix(name)], **kinds),
                "tag": SearchFilters(tags={"bucket": buckets[name]}, **kinds),
                "meta": SearchFilters(metadata={"bucket": buckets[name]}, **kinds),
            }[kind]
            cells.append((f"{kind} {name}", name, chosen))
    return cells


def arguments(description: str | None = None) -> argparse.ArgumentParser:
    """This bench's options (the corpus's among them: bench/citus_search.py rebuilds the same
    corpus's queries with them)."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument(
        "--chunks-per-doc",
        type=int,
        default=CHUNKS_PER_DOC,
        help="Chunks per document (1: as many documents as chunks, like notes or memories). "
        "A reused --db must have been built with the same value.",
    )
    parser.add_argument(
        "--vocabulary",
        type=int,
        default=VOCABULARY_SIZE,
        help="Distinct words of the corpus (a smaller one starts faster, for quick checks). "
        "A reused --db must have been built with the same value.",
    )
    parser.add_argument(
        "--corpus",
        choices=("synthetic", "scifact"),
        default="synthetic",
        help="synthetic: Zipfian made-up words (the default); scifact: one-chunk documents each "
        "carrying a real abstract of --dataset, asked SciFact's real claims. A reused --db "
        "must have been built with the same value.",
    )
    parser.add_argument("--dataset", type=Path, help="With --corpus scifact: a SciFact folder.")
    parser.add_argument(
        "--vectors",
        choices=("hashing", "shaped"),
        default="hashing",
        help="hashing: the hashing embedder's vectors of the text; shaped: drawn from the model "
        "of real vectors in --shape (bench/vector_shape.py), queries near their source chunk. "
        "A reused --db must have been built with the same value.",
    )
    parser.add_argument(
        "--shape",
        type=Path,
        default=DEFAULT_SHAPE,
        help="With --vectors shaped: the fitted model (default: %(default)s).",
    )
    parser.add_argument("--limits", default="10", help="Result limits k (comma-separated).")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time a caller waits; "
        "cpu: the process's CPU time (comparisons on a busy machine).",
    )
    parser.add_argument(
        "--no-recall", action="store_true", help="Time only (no brute-force comparison)."
    )
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--anisotropy",
        type=float,
        default=0.0,
        help="Real-model-like vectors: weight of a direction every vector shares (e.g. 0.6); "
        "0 keeps the hashing embedder's vectors. The file remembers what it was built with.",
    )
    parser.add_argument(
        "--filters", default="path,tag,meta", help="Scope kinds: path, tag, meta (comma-separated)."
    )
    parser.add_argument(
        "--db",
        help="Keep the corpus here (reused if it exists): a file, or a postgresql:// URL to run "
        "both backends side by side (the file is --file) or PostgreSQL alone (--postgres-only).",
    )
    parser.add_argument(
        "--file",
        type=Path,
        help="With a PostgreSQL --db: the SQLite file of the same corpus (built if missing, "
        "copied into the database with `kbmcp copy` when the database does not hold it).",
    )
    parser.add_argument(
        "--postgres-only",
        action="store_true",
        help="With a PostgreSQL --db: no SQLite side; the corpus is written straight into the "
        "database and recall is against PostgreSQL's own exact search.",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="With a PostgreSQL --db: write the corpus and stop (a long build needs no bench "
        "lock; the timed run reuses it).",
    )
    parser.add_argument(
        "--revector",
        action="store_true",
        help="With a reused PostgreSQL --db: replace its vectors by the ones --vectors draws and "
        "rebuild the HNSW index (the text and keyword rows, most of a build, are kept).",
    )
    parser.add_argument(
        "--ef-search",
        type=int,
        help="PostgreSQL: the HNSW search's breadth for this run (vector_channel.HNSW_EF_SEARCH).",
    )
    parser.add_argument(
        "--exact-max-rows",
        type=int,
        help="PostgreSQL: unscoped searches over at most this many chunks scan exactly instead "
        "of using the HNSW index, for this run (plan_choice.VECTOR_EXACT_MAX_ROWS).",
    )
    parser.add_argument(
        "--halves-min-rows",
        type=int,
        help="PostgreSQL: scopes from this many chunks run their two channels on two "
        "connections, for this run (halves.HALVES_MIN_ROWS).",
    )
    parser.add_argument(
        "--store-lanes",
        type=int,
        help="PostgreSQL on Citus: a search over several stores runs its per-store statements "
        "on this many connections at once, for this run (shards.STORE_LANES; 1: one after "
        "another).",
    )
    parser.add_argument(
        "--bounded-list-size",
        type=int,
        help="PostgreSQL: the bounded keyword plan's least postings per kept token, for this "
        "run (plan_choice.BOUNDED_LIST_SIZE; the lists grow with the searched rows from it).",
    )
    parser.add_argument(
        "--bounded-rescored",
        type=int,
        help="PostgreSQL: the bounded keyword plan's least candidates scored exactly, per "
        "result of depth, for this run (plan_choice.BOUNDED_RESCORED_PER_DEPTH; they grow "
        "with the searched rows from it).",
    )
    parser.add_argument(
        "--real-queries",
        action="store_true",
        help="Ask the real questions bench/real_vectors.py embedded (their text and their real "
        "vectors) instead of queries drawn from the corpus: recall's lower bound.",
    )
    parser.add_argument(
        "--memories",
        type=int,
        default=0,
        help="Memories the file should hold besides the documents (10-40 words each, one memory "
        "store); the ones a reused --db lacks are added. Searches cover both kinds.",
    )
    parser.add_argument(
        "--documents-only",
        action="store_true",
        help="Search documents only in every cell (include_memories=False).",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=40,
        help="Queries per scope (other than the measured ones) run first, as a server that has "
        "been answering for a while would have (fills the per-term keyword cache).",
    )
    return parser


def main() -> None:
    args = arguments().parse_args()
    if args.memories and (args.corpus != "synthetic" or args.vectors != "hashing"):
        raise SystemExit("--memories: with the synthetic corpus and hashing vectors only")
    if args.vectors == "shaped" and not args.shape.exists():
        raise SystemExit(f"no model of real vectors at {args.shape}: run bench/vector_shape.py")
    if args.db and is_postgres_url(args.db):
        import postgres_search  # bench/postgres_search.py, beside this file

        postgres_search.main(args, sys.modules[__name__])
        return
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        corpus = corpus_of(args)
        db_path = Path(args.db) if args.db else Path(tmp) / "bench.db"
        reuse = db_path.exists()
        ws = Workspace(
            Settings(db=db_path, embedder="hash"), embedder=HashingEmbedder(), long_lived=True
        )
        samples = build(ws, corpus, write=not reuse)
        print(f"built {args.chunks} chunks in {time.perf_counter() - started:.0f}s")
        started = time.perf_counter()
        held, added = add_memories(ws, corpus, args.memories)
        if held:
            print(f"memories: {held} ({added} added in {time.perf_counter() - started:.0f}s)")
        queries, warmup, ws._embedder = queries_of(args, corpus, samples)
        reference = Workspace(ws.settings, embedder=ws._embedder)  # one-shot: SQL only
        kinds = {"include_memories": False} if args.documents_only else {}
        cells = make_cells(args.filters, kinds)
        for mode in args.modes.split(","):  # warm caches once per mode
            search(ws, ws.local_principal(), SearchRequest(queries["unscoped"][0], mode=mode))
        started = time.perf_counter()
        for _, sample, filters in cells:
            for query in warmup[sample]:
                search(ws, ws.local_principal(), SearchRequest(query, filters=filters))
        print(f"warm-up: {args.warmup} queries per scope in {time.perf_counter() - started:.1f}s")
        header = f"{'mode':<9}{'scope':<12}{'k':>4}{'p50 ms':>9}{'p95 ms':>9}{'recall@k':>10}"
        print(header + (f"{'memories':>10}" if held else ""))
        limits = [int(k) for k in args.limits.split(",")]
        for mode in args.modes.split(","):
            for label, sample, filters in cells:
                for limit in limits:
                    timings, recall, share = run_cell(
                        ws,
                        reference,
                        queries[sample],
                        mode,
                        filters,
                        limit,
                        CLOCKS[args.clock],
                        not args.no_recall,
                    )
                    print(
                        f"{mode:<9}{label:<12}{limit:>4}{percentile(timings, 50):>9.1f}"
                        f"{percentile(timings, 95):>9.1f}{recall:>10.3f}"
                        + (f"{share:>10.1%}" if held else ""),
                        flush=True,
                    )
        reference.close()
        ws.close()


if __name__ == "__main__":
    main()
