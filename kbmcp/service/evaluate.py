"""`kbmcp eval`: retrieval quality of the real ingest + search path on a BEIR-format dataset.

The corpus is written out as one Markdown file per BEIR document (``<quoted _id>.md``, the title
as a ``# `` heading, then the text) and ingested with :func:`add_paths`, exactly as a user's
files would be. A corpus of real files (``corpus.paths``, kbmcp/eval/beir.py) is added as it is,
on every run (unchanged files cost nothing), and its documents are known by their source files.
Every query then goes through the search service; chunk results are collapsed to documents (the
best-ranked chunk of a document stands for it) before the metrics are computed.
"""

from __future__ import annotations

import re
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbmcp.access import Principal
from kbmcp.eval.beir import CORPUS_PATHS, BeirDataset, BeirDocument, CorpusFiles, load_beir
from kbmcp.eval.metrics import METRIC_KEYS, percentile, query_metrics, summarize
from kbmcp.ingest.chunker import ChunkingOptions
from kbmcp.service.ingest import IngestOptions, IngestReport, Progress, add_paths
from kbmcp.service.listing import list_knowledge_bases
from kbmcp.workspace import Workspace

DOCUMENT_SUFFIX = ".md"
_SPACES = re.compile(r"\s+")


def document_file_name(beir_id: str) -> str:
    """The file a BEIR document is written to; :func:`beir_id_from_path` inverts it."""
    return urllib.parse.quote(beir_id, safe="") + DOCUMENT_SUFFIX


def beir_id_from_path(path: str) -> str | None:
    """The BEIR id of a document ingested by :func:`write_corpus` (None for any other path)."""
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(DOCUMENT_SUFFIX):
        return None
    return urllib.parse.unquote(name[: -len(DOCUMENT_SUFFIX)])


def document_markdown(document: BeirDocument) -> str:
    """A BEIR document as a user's Markdown file: ``# title`` (on one line), a blank line, text."""
    title = _SPACES.sub(" ", document.title).strip()
    text = document.text.strip()
    if not title:
        return text + "\n"
    return f"# {title}\n\n{text}\n"


def write_corpus(corpus: Iterable[BeirDocument], folder: Path) -> int:
    """Write every document of ``corpus`` into ``folder``; return how many were written."""
    count = 0
    for document in corpus:
        (folder / document_file_name(document.id)).write_text(
            document_markdown(document), encoding="utf-8"
        )
        count += 1
    return count


def default_kb_name(dataset_dir: Path) -> str:
    return f"beir-{Path(dataset_dir).resolve().name}"


@dataclass(frozen=True)
class IngestOutcome:
    knowledge_base: str
    documents: int
    reused: bool  # the knowledge base already held the corpus: nothing was ingested
    report: IngestReport | None


def kb_document_count(workspace: Workspace, principal: Principal, name: str) -> int | None:
    """Published documents of the principal's knowledge base ``name`` (None: no such base)."""
    for kb in list_knowledge_bases(workspace, principal):
        if kb.name == name:
            return kb.document_count
    return None


def ingest_corpus(
    workspace: Workspace,
    principal: Principal,
    dataset: BeirDataset,
    kb_name: str,
    *,
    chunking: ChunkingOptions | None = None,
    progress: Progress | None = None,
) -> IngestOutcome:
    """Ingest the corpus into ``kb_name`` unless it already holds exactly that many documents.

    A corpus of files is added on every run, as `kbmcp add --prune` would: only what changed is
    re-indexed, and files gone from a listed folder leave the knowledge base."""
    if dataset.files is not None:
        return _ingest_files(workspace, principal, dataset.files, kb_name, chunking, progress)
    existing = kb_document_count(workspace, principal, kb_name)
    if existing == len(dataset.corpus):
        return IngestOutcome(kb_name, existing, reused=True, report=None)
    options = IngestOptions(knowledge_base=kb_name, chunking=chunking or ChunkingOptions())
    with tempfile.TemporaryDirectory(prefix="kbmcp-eval-") as tmp:
        folder = Path(tmp) / dataset.name
        folder.mkdir()
        write_corpus(dataset.corpus, folder)
        report = add_paths(workspace, principal, [folder], options, progress)
    documents = kb_document_count(workspace, principal, kb_name) or 0
    return IngestOutcome(kb_name, documents, reused=False, report=report)


def _ingest_files(
    workspace: Workspace,
    principal: Principal,
    files: CorpusFiles,
    kb_name: str,
    chunking: ChunkingOptions | None,
    progress: Progress | None,
) -> IngestOutcome:
    options = IngestOptions(
        knowledge_base=kb_name, chunking=chunking or ChunkingOptions(), prune=True
    )
    report = add_paths(workspace, principal, files.paths, options, progress)
    if report.errors:
        raise ValueError(f"{CORPUS_PATHS}: {report.errors[0]}")
    changed = report.added + report.updated + report.archived
    documents = kb_document_count(workspace, principal, kb_name) or 0
    return IngestOutcome(kb_name, documents, reused=changed == 0, report=report)


def file_corpus_ids(workspace: Workspace, files: CorpusFiles, kb_id: str) -> dict[str, str]:
    """Document public id -> corpus id (the file's path under ``files.root``)."""
    rows = workspace.store.evaluation.document_sources(workspace.conn, kb_id)
    ids = {document_id: files.corpus_id(source) for document_id, source in rows}
    return {document_id: corpus_id for document_id, corpus_id in ids.items() if corpus_id}


def check_judged_files(dataset: BeirDataset, corpus_ids: Iterable[str], where: Path) -> None:
    """Every judged corpus id must be a file of the corpus: a renamed or deleted file would
    otherwise make its questions unanswerable without a word."""
    known = set(corpus_ids)
    for query_id, grades in dataset.qrels.items():
        for corpus_id in grades:
            if corpus_id not in known:
                raise ValueError(
                    f"{where}: query {query_id!r} judges {corpus_id!r}, which is not a file "
                    f"of the corpus ({CORPUS_PATHS})"
                )


SearchFunction = Callable[[Workspace, Principal, Any], Any]
"""``search(workspace, principal, SearchRequest) -> SearchResponse`` (injectable for tests)."""


@dataclass(frozen=True)
class EvalOptions:
    modes: Sequence[str] = ("lexical", "semantic", "hybrid", "rrf")
    limit: int = 100  # chunk results requested per query (the service caps it at 100)
    alpha: float | None = None  # None: the engine's default
    rrf_k: int | None = None
    min_similarity: float | None = None
    candidates: int | None = None


@dataclass
class ModeResult:
    mode: str
    metrics: dict[str, float]  # METRIC_KEYS, latency_ms_p50, latency_ms_p95, queries
    run: dict[str, list[str]] = field(repr=False)  # query id -> BEIR doc ids, best first


@dataclass
class EvalReport:
    dataset: str
    knowledge_base: str
    knowledge_base_id: str
    documents: int
    queries: int
    ingest: IngestOutcome
    options: EvalOptions
    modes: dict[str, ModeResult]

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape: metrics per mode plus what was measured."""
        return {
            "dataset": self.dataset,
            "knowledge_base": self.knowledge_base,
            "knowledge_base_id": self.knowledge_base_id,
            "documents": self.documents,
            "queries": self.queries,
            "reused_knowledge_base": self.ingest.reused,
            "limit": self.options.limit,
            "alpha": self.options.alpha,
            "rrf_k": self.options.rrf_k,
            "min_similarity": self.options.min_similarity,
            "candidates": self.options.candidates,
            "modes": {mode: result.metrics for mode, result in self.modes.items()},
        }


def collapse_to_documents(paths: Iterable[str]) -> list[str]:
    """BEIR ids of the ranked result paths, best chunk first, each document once."""
    return first_of_each(beir_id_from_path(path) for path in paths)


def first_of_each(corpus_ids: Iterable[str | None]) -> list[str]:
    """The ids in order, each once, None (a result outside the corpus) left out."""
    ranked: list[str] = []
    seen: set[str] = set()
    for corpus_id in corpus_ids:
        if corpus_id is not None and corpus_id not in seen:
            seen.add(corpus_id)
            ranked.append(corpus_id)
    return ranked


CorpusIdOf = Callable[[Any], "str | None"]
"""A search result -> the corpus id of its document (None: not a document of the corpus)."""


def _beir_corpus_id(result: Any) -> str | None:
    return beir_id_from_path(result.path)


def _default_search() -> SearchFunction:
    from kbmcp.service.search import search

    return search


def _request(query: str, mode: str, kb_id: str, options: EvalOptions) -> Any:
    from kbmcp.search.models import SearchFilters, SearchRequest

    # Each fusion parameter goes to its own mode only (another mode refuses it).
    return SearchRequest(
        query=query,
        mode=mode,
        alpha=options.alpha if mode == "hybrid" else None,
        rrf_k=options.rrf_k if mode == "rrf" else None,
        min_similarity=options.min_similarity,
        limit=options.limit,
        filters=SearchFilters(knowledge_base_ids=[kb_id]),
        candidates=options.candidates,
    )


def run_mode(
    workspace: Workspace,
    principal: Principal,
    dataset: BeirDataset,
    kb_id: str,
    mode: str,
    options: EvalOptions,
    search: SearchFunction,
    corpus_id_of: CorpusIdOf = _beir_corpus_id,
) -> ModeResult:
    """Every query of ``dataset`` in ``mode``: metrics over documents and wall-clock latency.

    One untimed warm-up query first, so loading the model is not counted as query latency.
    """
    if dataset.queries:
        search(workspace, principal, _request(dataset.queries[0].text, mode, kb_id, options))
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    for query in dataset.queries:
        request = _request(query.text, mode, kb_id, options)
        started = time.perf_counter()
        response = search(workspace, principal, request)
        latencies.append((time.perf_counter() - started) * 1000.0)
        run[query.id] = first_of_each(corpus_id_of(result) for result in response.results)
    return ModeResult(mode, mode_metrics(run, dataset.qrels, latencies), run)


def mode_metrics(
    run: dict[str, list[str]], qrels: dict[str, dict[str, int]], latencies_ms: Sequence[float]
) -> dict[str, float]:
    per_query = [query_metrics(run.get(qid, []), grades) for qid, grades in qrels.items()]
    metrics = summarize(per_query) if per_query else dict.fromkeys(METRIC_KEYS, 0.0)
    metrics = {key: metrics[key] for key in METRIC_KEYS}
    metrics["latency_ms_p50"] = percentile(latencies_ms, 50) if latencies_ms else 0.0
    metrics["latency_ms_p95"] = percentile(latencies_ms, 95) if latencies_ms else 0.0
    metrics["queries"] = len(per_query)
    return metrics


def _kb_public_id(workspace: Workspace, principal: Principal, name: str) -> str:
    for kb in list_knowledge_bases(workspace, principal):
        if kb.name == name:
            return kb.knowledge_base_id
    raise LookupError(f"knowledge base {name!r} not found after ingest")


def evaluate(
    workspace: Workspace,
    principal: Principal,
    dataset_dir: Path,
    *,
    kb_name: str | None = None,
    options: EvalOptions = EvalOptions(),
    chunking: ChunkingOptions | None = None,
    progress: Progress | None = None,
    search: SearchFunction | None = None,
) -> EvalReport:
    """Load ``dataset_dir``, ingest (or reuse) its corpus, run every query in every mode."""
    dataset = load_beir(dataset_dir)
    name = kb_name or default_kb_name(dataset_dir)
    outcome = ingest_corpus(
        workspace, principal, dataset, name, chunking=chunking, progress=progress
    )
    kb_id = _kb_public_id(workspace, principal, name)
    corpus_id_of: CorpusIdOf = _beir_corpus_id
    if dataset.files is not None:
        ids = file_corpus_ids(workspace, dataset.files, kb_id)
        check_judged_files(dataset, ids.values(), Path(dataset_dir))
        corpus_id_of = lambda result: ids.get(result.document_id)  # noqa: E731
    search_fn = search or _default_search()
    modes = {
        mode: run_mode(workspace, principal, dataset, kb_id, mode, options, search_fn, corpus_id_of)
        for mode in options.modes
    }
    return EvalReport(
        dataset=dataset.name,
        knowledge_base=name,
        knowledge_base_id=kb_id,
        documents=outcome.documents,
        queries=len(dataset.queries),
        ingest=outcome,
        options=options,
        modes=modes,
    )
