"""Adding documents given as text (a library API for benchmarks, importers and tools).

The same write path as `kbmcp add` (`kbmcp.service.ingest`), without the file system: each
document is parsed and chunked as a file of its kind would be, and embedded by the workspace's
model unless it carries its own vectors (then nothing is embedded). Documents are keyed by
path in the knowledge base: adding a path again updates that document (a new revision when the
content changed). See docs/ingest.md for an example.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kbmcp.access import WRITE, Principal
from kbmcp.errors import InvalidRequest
from kbmcp.ingest.chunker import ChunkingOptions, ChunkSpan, chunk_document
from kbmcp.ingest.formats import kind_of
from kbmcp.ingest.parsing import ParsedDocument, parse_document
from kbmcp.service.ingest import (
    IngestReport,
    KnownDocuments,
    ensure_kb,
    kb_name_of,
    pending_document,
)
from kbmcp.service.ingest_batch import IngestBatch
from kbmcp.store.catalog import dump_json
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace

KINDS = ("markdown", "html", "rst", "pdf", "text", "code")
DEFAULT_CHUNKING = ChunkingOptions()


@dataclass(frozen=True)
class DocumentInput:
    """A document given as text to `add_documents`.

    `kind`: markdown, html (already Markdown-shaped text), rst, pdf (page-marked text), text or
    code; by default the one `path` implies. `vectors`: optional precomputed chunk vectors, one
    row per chunk of `chunk_document(content, kind, chunking)` in order, of the file's model
    dimension; without them the workspace's embedder computes them.
    """

    path: str
    content: str
    title: str | None = None
    kind: str | None = None
    tags: Sequence[tuple[str, str]] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None
    vectors: Sequence[Sequence[float]] | np.ndarray | None = None


def add_documents(
    workspace: Workspace,
    principal: Principal,
    knowledge_base: str,
    documents: Sequence[DocumentInput],
    *,
    chunking: ChunkingOptions = DEFAULT_CHUNKING,
) -> IngestReport:
    """Add or update documents given as text in a knowledge base of the principal's tenant
    (created if new), through the same write path as `add_paths`. Every document is checked
    (path, kind, vector shape) before anything is written; each batch is written whole."""
    principal.require(WRITE)
    kb_name = kb_name_of(knowledge_base)
    workspace.ensure_model()
    dimension = workspace.embedder.fingerprint.dimension
    prepared = [_prepare_input(document, chunking, dimension) for document in documents]
    _check_unique_paths([document.path for document in prepared])
    started = time.perf_counter()
    with workspace.lock:
        kb = ensure_kb(workspace, principal, kb_name)
        known = KnownDocuments.load(workspace, kb)
    report = IngestReport(knowledge_base_id=kb.public_id, knowledge_base=kb.name)
    counts = Counter[str]()
    batch = IngestBatch(workspace, kb, counts)
    for document, given in zip(documents, prepared, strict=True):
        pending = pending_document(
            given.path, document.source, document.content, given.parsed, given.tags,
            given.metadata, known.get(given.path), chunking, given.vectors, given.spans,
        )  # fmt: skip
        if pending is None:
            report.unchanged += 1
        else:
            batch.queue(pending)
    batch.flush()
    report.take(counts)
    report.seconds = time.perf_counter() - started
    return report


@dataclass(frozen=True)
class _CheckedInput:
    path: str
    parsed: ParsedDocument
    tags: list[tuple[str, str]]
    metadata: dict[str, Any]
    vectors: list[bytes] | None
    spans: list[ChunkSpan]


def _prepare_input(
    document: DocumentInput, chunking: ChunkingOptions, dimension: int
) -> _CheckedInput:
    """Check one `DocumentInput` and parse and chunk it; an `InvalidRequest` names the
    document and the argument at fault."""
    path = document.path.strip() if isinstance(document.path, str) else ""
    if not path:
        raise InvalidRequest("a document path must not be empty", details={"argument": "path"})
    if not isinstance(document.content, str):
        raise InvalidRequest(f"{path}: content must be text", details={"argument": "content"})
    kind = document.kind or kind_of(path.rsplit("/", 1)[-1]) or "text"
    if kind not in KINDS:
        raise InvalidRequest(f"{path}: unknown kind {kind!r}", details={"argument": "kind"})
    parsed = parse_document(document.content, path, kind, document.title)
    if document.title and document.title.strip():
        parsed = dataclasses.replace(parsed, title=document.title.strip())
    tags = sorted(set(parsed.tags) | {(str(k), str(v)) for k, v in document.tags})
    metadata = {**parsed.metadata, **dict(document.metadata)}
    try:
        dump_json(metadata)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(
            f"{path}: metadata is not JSON ({exc})", details={"argument": "metadata"}
        ) from None
    spans = chunk_document(document.content, kind, chunking)
    vectors = None if document.vectors is None else _blobs(document, len(spans), dimension)
    return _CheckedInput(path, parsed, tags, metadata, vectors, spans)


def _blobs(document: DocumentInput, chunks: int, dimension: int) -> list[bytes]:
    try:
        array = np.asarray(document.vectors, dtype=np.float32)
    except (TypeError, ValueError):
        array = np.empty((0,))
    if array.ndim != 2 or array.shape != (chunks, dimension):
        raise InvalidRequest(
            f"{document.path}: vectors must be {chunks} x {dimension} (one per chunk, "
            f"the model's dimension), got shape {tuple(array.shape)}",
            details={"argument": "vectors", "chunks": chunks, "dimension": dimension},
        )
    if not np.isfinite(array).all():
        raise InvalidRequest(
            f"{document.path}: vectors must be finite", details={"argument": "vectors"}
        )
    return [to_blob(row) for row in array]


def _check_unique_paths(paths: list[str]) -> None:
    repeated = sorted(path for path, count in Counter(paths).items() if count > 1)
    if repeated:
        raise InvalidRequest(
            f"the same path more than once: {', '.join(repeated)}",
            details={"argument": "documents", "paths": repeated},
        )
