"""`kbmcp add`: files and folders in, documents, revisions, chunks and index entries out.

Each changed document is written in its own short transaction (document row, new immutable
revision, chunks, stored vectors, FTS5 and vec0 entries, tags), so an interrupted ingest never
leaves a half-indexed document and other processes are never blocked for long. Embedding, the slow
part, happens before the transaction, in batches across documents.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from kbmcp.access import WRITE, Principal
from kbmcp.clock import now_iso
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import InvalidRequest
from kbmcp.ids import make_id
from kbmcp.ingest.chunker import ChunkingOptions, ChunkSpan, chunk_document
from kbmcp.ingest.parsing import ParsedDocument, parse_document
from kbmcp.ingest.walker import SourceFile, WalkReport, iter_source_files, read_text_file
from kbmcp.store import catalog as sql
from kbmcp.store.catalog import DEFAULT_KB, KnowledgeBaseRef, TenantRef, dump_json
from kbmcp.store.connection import write_transaction
from kbmcp.store.index import IndexRow, add_to_index, chunk_ids_of_revision, remove_from_index
from kbmcp.store.vectors import drop_stored_vectors, store_vectors, to_blob
from kbmcp.workspace import Workspace

# Chunks collected before one embedding call: big enough for efficient batches, small enough
# that progress moves and memory stays flat.
EMBED_BATCH_CHUNKS = 256

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class IngestOptions:
    knowledge_base: str = DEFAULT_KB
    tags: Sequence[tuple[str, str]] = ()
    metadata: Sequence[tuple[str, str]] = ()
    prune: bool = False
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)


@dataclass
class IngestReport:
    knowledge_base_id: str = ""
    knowledge_base: str = ""
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    archived: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    chunks_indexed: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary_line(self) -> str:
        skipped = sum(self.skipped.values())
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.skipped.items()))
        return (
            f"{self.knowledge_base}: added {self.added}, updated {self.updated}, "
            f"unchanged {self.unchanged}, archived {self.archived}, "
            f"skipped {skipped}{f' ({reasons})' if reasons else ''}; "
            f"{self.chunks_indexed} chunks indexed ({self.chunks_embedded} embedded) "
            f"in {self.seconds:.1f}s"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "knowledge_base_id": self.knowledge_base_id,
            "knowledge_base": self.knowledge_base,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "archived": self.archived,
            "skipped": dict(sorted(self.skipped.items())),
            "chunks_indexed": self.chunks_indexed,
            "chunks_embedded": self.chunks_embedded,
            "seconds": round(self.seconds, 3),
            "warnings": self.warnings,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class _KnownDocument:
    """A document as it stood when the run started: enough to decide skip / update."""

    title: str
    status: str
    source: str | None
    attributes_hash: str
    revision_id: int | None
    content_hash: str | None


@dataclass
class _PendingDocument:
    source: SourceFile
    content: str
    content_hash: str
    parsed: ParsedDocument
    tags: list[tuple[str, str]]
    metadata: dict[str, Any]
    attributes_hash: str
    spans: list[ChunkSpan]
    known: _KnownDocument | None

    def embedding_inputs(self) -> list[str]:
        return [
            chunk_embedding_input(self.parsed.title, span.heading_path, span.text)
            for span in self.spans
        ]


def add_paths(
    workspace: Workspace,
    principal: Principal,
    paths: Sequence[Path],
    options: IngestOptions = IngestOptions(),
    progress: Progress | None = None,
) -> IngestReport:
    """Ingest files and folders into a knowledge base of the principal's tenant (created if new)."""
    principal.require(WRITE)
    kb_name = options.knowledge_base.strip()
    if not kb_name:
        raise InvalidRequest("the knowledge base name must not be empty")
    started = time.perf_counter()
    conn = workspace.conn
    workspace.ensure_model()
    tenant = TenantRef(principal.tenant_id, principal.tenant_public_id)
    with write_transaction(conn):
        kb = sql.ensure_knowledge_base(conn, tenant, kb_name)
    report = IngestReport(knowledge_base_id=kb.public_id, knowledge_base=kb.name)
    walk = WalkReport()
    files = list(iter_source_files(list(paths), walk))
    report.errors.extend(walk.errors)
    report.skipped.update(walk.skipped)
    known = _known_documents(conn, kb)
    run = _IngestRun(workspace, kb, report)
    seen_paths: set[str] = set()
    for done, source in enumerate(files, start=1):
        pending = _prepare(source, options, known, seen_paths, report)
        if pending is not None:
            run.queue(pending)
        if progress:
            progress(done, len(files))
    run.flush()
    if options.prune:
        report.archived = _prune(conn, kb, paths, seen_paths)
    report.seconds = time.perf_counter() - started
    return report


def _known_documents(conn: apsw.Connection, kb: KnowledgeBaseRef) -> dict[str, _KnownDocument]:
    rows = conn.execute(sql.SELECT_DOCUMENT_STATES, {"kb_id": kb.id})
    return {
        path: _KnownDocument(title, status, source, attributes_hash, revision_id, content_hash)
        for _id, _public_id, path, title, status, source, attributes_hash, revision_id, content_hash
        in rows
    }  # fmt: skip


def _prepare(
    source: SourceFile,
    options: IngestOptions,
    known: dict[str, _KnownDocument],
    seen_paths: set[str],
    report: IngestReport,
) -> _PendingDocument | None:
    """Read one file and decide: skip it, leave it unchanged, or queue a new revision."""
    content, skip_reason = read_text_file(source.path)
    if content is None:
        report.skipped[skip_reason or "unreadable"] += 1
        return None
    if source.relative_path in seen_paths:
        report.skipped["duplicate path"] += 1
        report.warnings.append(
            f"{source.path}: path {source.relative_path!r} was already added in this run; skipped"
        )
        return None
    seen_paths.add(source.relative_path)
    parsed = parse_document(content, source.relative_path)
    if parsed.warning:
        report.warnings.append(f"{source.path}: {parsed.warning}")
    tags = sorted(set(parsed.tags) | set(options.tags))
    metadata = {**parsed.metadata, **dict(options.metadata)}
    attributes_hash = _sha256(dump_json([parsed.title, parsed.kind, tags, metadata]))
    content_hash = _sha256(content)
    previous = known.get(source.relative_path)
    if (
        previous is not None
        and previous.status == "published"
        and previous.content_hash == content_hash
        and previous.attributes_hash == attributes_hash
        and previous.source == str(source.path)
    ):
        report.unchanged += 1
        return None
    spans = chunk_document(content, parsed.kind, options.chunking)
    return _PendingDocument(
        source, content, content_hash, parsed, tags, metadata, attributes_hash, spans, previous
    )


class _IngestRun:
    """Collects changed documents, embeds them in batches, writes each in its own transaction."""

    def __init__(self, workspace: Workspace, kb: KnowledgeBaseRef, report: IngestReport) -> None:
        self.workspace = workspace
        self.conn = workspace.conn
        self.kb = kb
        self.report = report
        self.pending: list[_PendingDocument] = []
        self.pending_chunks = 0

    def queue(self, document: _PendingDocument) -> None:
        self.pending.append(document)
        self.pending_chunks += len(document.spans)
        if self.pending_chunks >= EMBED_BATCH_CHUNKS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        vectors = self._vectors_for(self.pending)
        for document in self.pending:
            self._write(document, vectors)
        self.pending = []
        self.pending_chunks = 0

    def _vectors_for(self, documents: list[_PendingDocument]) -> dict[str, bytes]:
        """Vectors keyed by embedding input: reused from the previous revision where a chunk's
        input is unchanged, computed in one batch for the rest."""
        vectors: dict[str, bytes] = {}
        for document in documents:
            if document.known and document.known.revision_id is not None:
                vectors.update(self._previous_vectors(document.known))
        missing = sorted(
            {text for d in documents for text in d.embedding_inputs()} - vectors.keys()
        )
        if missing:
            embedded = self.workspace.embedder.embed(missing)
            vectors.update(zip(missing, (to_blob(row) for row in embedded), strict=True))
            self.report.chunks_embedded += len(missing)
        return vectors

    def _previous_vectors(self, known: _KnownDocument) -> dict[str, bytes]:
        rows = self.conn.execute(sql.SELECT_CHUNKS_WITH_VECTORS, {"revision_id": known.revision_id})
        return {
            chunk_embedding_input(known.title, json.loads(heading), text): embedding
            for heading, text, embedding in rows
        }

    def _write(self, document: _PendingDocument, vectors: dict[str, bytes]) -> None:
        conn = self.conn
        path = document.source.relative_path
        now = now_iso()
        with write_transaction(conn):
            # Re-read under the write lock: another process may have written this path meanwhile.
            row = conn.execute(
                sql.SELECT_DOCUMENT_FOR_UPDATE, {"kb_id": self.kb.id, "path": path}
            ).fetchone()
            if row is None:
                document_public_id = make_id("document", self.kb.public_id, path)
                conn.execute(
                    sql.INSERT_DOCUMENT,
                    {
                        "public_id": document_public_id,
                        "kb_id": self.kb.id,
                        "path": path,
                        "title": document.parsed.title,
                        "kind": document.parsed.kind,
                        "source": str(document.source.path),
                        "metadata": dump_json(document.metadata),
                        "now": now,
                    },
                )
                document_id = conn.last_insert_rowid()
                self.report.added += 1
            else:
                document_id, document_public_id, status, old_revision_id = row
                if old_revision_id is not None:
                    old_chunk_ids = chunk_ids_of_revision(conn, old_revision_id)
                    if status == "published":
                        remove_from_index(conn, old_chunk_ids)
                    drop_stored_vectors(conn, old_chunk_ids)
                self.report.updated += 1
            number = conn.execute(
                sql.NEXT_REVISION_NUMBER, {"document_id": document_id}
            ).fetchone()[0]
            revision_public_id = make_id("revision", document_public_id, number)
            conn.execute(
                sql.INSERT_REVISION,
                {
                    "public_id": revision_public_id,
                    "document_id": document_id,
                    "number": number,
                    "content": document.content,
                    "content_hash": document.content_hash,
                    "char_count": len(document.content),
                    "line_count": _line_count(document.content),
                    "now": now,
                },
            )
            revision_id = conn.last_insert_rowid()
            rows = []
            for span, embedding_input in zip(
                document.spans, document.embedding_inputs(), strict=True
            ):
                conn.execute(
                    sql.INSERT_CHUNK,
                    {
                        "public_id": make_id("chunk", revision_public_id, span.ordinal),
                        "revision_id": revision_id,
                        "ordinal": span.ordinal,
                        "heading_path": dump_json(list(span.heading_path)),
                        "char_start": span.char_start,
                        "char_end": span.char_end,
                        "line_start": span.line_start,
                        "line_end": span.line_end,
                        "text": span.text,
                    },
                )
                rows.append(
                    IndexRow(
                        conn.last_insert_rowid(), span.heading_path, span.text,
                        vectors[embedding_input],
                    )
                )  # fmt: skip
            store_vectors(conn, [(row.chunk_id, row.embedding) for row in rows])
            add_to_index(conn, document.parsed.title, rows)
            conn.execute(
                sql.UPDATE_DOCUMENT,
                {
                    "document_id": document_id,
                    "title": document.parsed.title,
                    "kind": document.parsed.kind,
                    "source": str(document.source.path),
                    "metadata": dump_json(document.metadata),
                    "revision_id": revision_id,
                    "attributes_hash": document.attributes_hash,
                    "now": now,
                },
            )
            conn.execute(sql.DELETE_TAGS, {"document_id": document_id})
            conn.executemany(
                sql.INSERT_TAG,
                [{"document_id": document_id, "key": k, "value": v} for k, v in document.tags],
            )
        self.report.chunks_indexed += len(rows)


def _prune(
    conn: apsw.Connection, kb: KnowledgeBaseRef, paths: Sequence[Path], seen: set[str]
) -> int:
    """Archive published documents whose source file lies under an added folder but was not
    found this run (deleted, now ignored, or no longer readable as text)."""
    roots = [str(p.expanduser().resolve()) for p in paths if p.expanduser().is_dir()]
    if not roots:
        return 0
    archived = 0
    for document_id, _public_id, path, _title, status, source, *_rest in conn.execute(
        sql.SELECT_DOCUMENT_STATES, {"kb_id": kb.id}
    ).fetchall():
        if status != "published" or path in seen or source is None:
            continue
        if not any(source.startswith(root + os.sep) for root in roots):
            continue
        archive_document(conn, document_id)
        archived += 1
    return archived


SELECT_CURRENT_REVISION = "SELECT current_revision_id FROM document WHERE id = :document_id"


def archive_document(conn: apsw.Connection, document_id: int) -> None:
    """Take a document out of the search indexes; its revisions stay readable."""
    with write_transaction(conn):
        revision_id = conn.execute(
            SELECT_CURRENT_REVISION, {"document_id": document_id}
        ).fetchone()[0]
        if revision_id is not None:
            remove_from_index(conn, chunk_ids_of_revision(conn, revision_id))
        conn.execute(sql.ARCHIVE_DOCUMENT, {"document_id": document_id, "now": now_iso()})


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _line_count(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)
