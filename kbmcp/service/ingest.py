"""`kbmcp add`: files and folders in, documents, revisions, chunks and index entries out.

Changed documents are embedded in batches (~EMBED_BATCH_CHUNKS chunks across documents), then each
batch is written in one short transaction of whole documents (document row, new immutable revision,
chunks, stored vectors, FTS5 and vec0 entries, tags): an interrupted ingest never leaves a
half-indexed document, other processes are never blocked for long, and the file is not rewritten
once per document (one transaction per small file cost ~40 WAL pages each). A document whose
content is unchanged but whose title, tags, metadata, source or archived status changed is updated
in place on its current revision: revisions are content snapshots.
"""

from __future__ import annotations

import functools
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
from kbmcp.store.vectors import check_model, drop_stored_vectors, store_vectors, to_blob
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
    """A file whose document needs writing.

    `reuse_revision`: the content equals the current revision's (only its title, tags, metadata,
    source or archived status changed), so the document is refreshed in place on that revision's
    chunks (`spans`, `chunk_ids`, loaded from the file) instead of getting a new revision.
    """

    source: SourceFile
    content: str
    content_hash: str
    parsed: ParsedDocument
    tags: list[tuple[str, str]]
    metadata: dict[str, Any]
    attributes_hash: str
    known: _KnownDocument | None
    reuse_revision: bool = False
    spans: list[ChunkSpan] = field(default_factory=list)
    chunk_ids: list[int] = field(default_factory=list)  # with reuse_revision: ids of `spans`

    @functools.cached_property
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
    """Ingest files and folders into a knowledge base of the principal's tenant (created if new).

    A path that does not exist is an `InvalidRequest` before anything is written.
    """
    principal.require(WRITE)
    kb_name = options.knowledge_base.strip()
    if not kb_name:
        raise InvalidRequest("the knowledge base name must not be empty")
    _check_paths(paths)
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
            # Files waiting in the embedding batch are not done yet: the bar moves when their
            # batch is written, and does not sit at 100% while the last batch embeds.
            progress(done - len(run.pending), len(files))
    run.flush()
    if progress:
        progress(len(files), len(files))
    if options.prune and walk.errors:
        report.warnings.append("--prune skipped: some folders could not be read (see errors)")
    elif options.prune:
        report.archived = _prune(conn, kb, paths, seen_paths)
    report.seconds = time.perf_counter() - started
    return report


def _check_paths(paths: Sequence[Path]) -> None:
    if not paths:
        raise InvalidRequest("no paths to add", details={"argument": "paths"})
    missing = [str(path) for path in paths if not path.expanduser().exists()]
    if missing:
        raise InvalidRequest(
            f"no such file or folder: {', '.join(missing)}",
            details={"argument": "paths", "missing": missing},
        )


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
    """Read one file and decide: skip it, leave it unchanged, refresh it in place (same content,
    other attributes) or queue a new revision (chunked here)."""
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
    same_content = (
        previous is not None
        and previous.revision_id is not None
        and previous.content_hash == content_hash
    )
    if (
        same_content
        and previous is not None
        and previous.status == "published"
        and previous.attributes_hash == attributes_hash
        and previous.source == str(source.path)
    ):
        report.unchanged += 1
        return None
    pending = _PendingDocument(
        source, content, content_hash, parsed, tags, metadata, attributes_hash, previous
    )
    if same_content:
        pending.reuse_revision = True  # its spans are loaded from the file when queued
    else:
        pending.spans = chunk_document(content, parsed.kind, options.chunking)
    return pending


class _IngestRun:
    """Collects changed documents, embeds them in batches, and writes each batch of whole
    documents in one short transaction."""

    def __init__(self, workspace: Workspace, kb: KnowledgeBaseRef, report: IngestReport) -> None:
        self.workspace = workspace
        self.conn = workspace.conn
        self.kb = kb
        self.report = report
        self.pending: list[_PendingDocument] = []
        self.pending_chunks = 0

    def queue(self, document: _PendingDocument) -> None:
        if document.reuse_revision and document.known and document.known.revision_id:
            document.chunk_ids, document.spans = _stored_spans(
                self.conn, document.known.revision_id
            )
        self.pending.append(document)
        self.pending_chunks += len(document.spans)
        if self.pending_chunks >= EMBED_BATCH_CHUNKS:
            self.flush()

    def flush(self) -> None:
        """Embed what the pending documents need, then write them in one transaction: a batch
        is committed whole or not at all, so no document is ever half-written."""
        if not self.pending:
            return
        vectors = self._vectors_for(self.pending)
        written = Counter[str]()
        with write_transaction(self.conn):
            # `kbmcp reembed` may have switched the model while these vectors were computed.
            check_model(self.conn, self.workspace.embedder.fingerprint)
            for document in self.pending:
                outcome, chunks_indexed = self._write(document, vectors)
                written[outcome] += 1
                written["chunks"] += chunks_indexed
        # Counted after the commit: a rolled-back batch reports nothing.
        self.report.added += written["added"]
        self.report.updated += written["updated"]
        self.report.unchanged += written["unchanged"]
        self.report.chunks_indexed += written["chunks"]
        self.pending = []
        self.pending_chunks = 0

    def _vectors_for(self, documents: list[_PendingDocument]) -> dict[str, bytes]:
        """Vectors keyed by embedding input: reused from the previous revision where a chunk's
        input is unchanged, computed in one batch for the rest."""
        vectors: dict[str, bytes] = {}
        for document in documents:
            if document.known and document.known.revision_id is not None:
                vectors.update(self._previous_vectors(document.known))
        missing = sorted({text for d in documents for text in d.embedding_inputs} - vectors.keys())
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

    def _write(self, document: _PendingDocument, vectors: dict[str, bytes]) -> tuple[str, int]:
        """Write one document inside the batch's transaction; returns ('added', 'updated' or
        'unchanged', the number of chunks put into the indexes)."""
        conn = self.conn
        now = now_iso()
        # Re-read under the write lock: another process may have written this path meanwhile.
        row = conn.execute(
            sql.SELECT_DOCUMENT_FOR_UPDATE,
            {"kb_id": self.kb.id, "path": document.source.relative_path},
        ).fetchone()
        if row is None:
            document_id, document_public_id = self._insert_document(document, now)
            revision_id = self._insert_revision(document, document_id, document_public_id, now)
            self._index_chunks(document, vectors)
            self._update_document(document, document_id, revision_id, now)
            return "added", len(document.spans)
        (document_id, document_public_id, status, current_revision_id, content_hash,
         attributes_hash, source) = row  # fmt: skip
        if (status, content_hash, attributes_hash, source) == (
            "published",
            document.content_hash,
            document.attributes_hash,
            str(document.source.path),
        ):
            return "unchanged", 0  # another process wrote exactly this since the run started
        known = document.known
        if (
            document.reuse_revision
            and known is not None
            and current_revision_id == known.revision_id
        ):
            reindexed = self._refresh(document, vectors, status)
            self._update_document(document, document_id, current_revision_id, now)
            return "updated", len(document.spans) if reindexed else 0
        if current_revision_id is not None:
            old_chunk_ids = chunk_ids_of_revision(conn, current_revision_id)
            if status == "published":
                remove_from_index(conn, old_chunk_ids)
            drop_stored_vectors(conn, old_chunk_ids)
        revision_id = self._insert_revision(document, document_id, document_public_id, now)
        self._index_chunks(document, vectors)
        self._update_document(document, document_id, revision_id, now)
        return "updated", len(document.spans)

    def _refresh(self, document: _PendingDocument, vectors: dict[str, bytes], status: str) -> bool:
        """Same content, other attributes: keep the revision and its chunks. The index is only
        rebuilt when it has to be: an archived document comes back, or the title (part of the
        keyword index and of every chunk's embedding input) changed. Returns whether it was."""
        known = document.known
        assert known is not None
        reindex = status != "published" or known.title != document.parsed.title
        if reindex:
            rows = self._index_rows(document, vectors)
            if status == "published":
                remove_from_index(self.conn, document.chunk_ids)
            store_vectors(self.conn, [(row.chunk_id, row.embedding) for row in rows])
            add_to_index(self.conn, document.parsed.title, rows)
        return reindex

    def _insert_document(self, document: _PendingDocument, now: str) -> tuple[int, str]:
        public_id = make_id("document", self.kb.public_id, document.source.relative_path)
        self.conn.execute(
            sql.INSERT_DOCUMENT,
            {
                "public_id": public_id,
                "kb_id": self.kb.id,
                "path": document.source.relative_path,
                "title": document.parsed.title,
                "kind": document.parsed.kind,
                "source": str(document.source.path),
                "metadata": dump_json(document.metadata),
                "now": now,
            },
        )
        return self.conn.last_insert_rowid(), public_id

    def _insert_revision(
        self, document: _PendingDocument, document_id: int, document_public_id: str, now: str
    ) -> int:
        """A new immutable revision and its chunks; sets `document.chunk_ids`."""
        conn = self.conn
        number = conn.execute(sql.NEXT_REVISION_NUMBER, {"document_id": document_id}).fetchone()[0]
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
        chunk_ids = []
        for span in document.spans:
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
            chunk_ids.append(conn.last_insert_rowid())
        document.chunk_ids = chunk_ids
        return revision_id

    def _index_chunks(self, document: _PendingDocument, vectors: dict[str, bytes]) -> None:
        rows = self._index_rows(document, vectors)
        store_vectors(self.conn, [(row.chunk_id, row.embedding) for row in rows])
        add_to_index(self.conn, document.parsed.title, rows)

    @staticmethod
    def _index_rows(document: _PendingDocument, vectors: dict[str, bytes]) -> list[IndexRow]:
        return [
            IndexRow(chunk_id, span.heading_path, span.text, vectors[embedding_input])
            for chunk_id, span, embedding_input in zip(
                document.chunk_ids, document.spans, document.embedding_inputs, strict=True
            )
        ]

    def _update_document(
        self, document: _PendingDocument, document_id: int, revision_id: int, now: str
    ) -> None:
        """Attributes, current revision, published status and tags."""
        self.conn.execute(
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
        self.conn.execute(sql.DELETE_TAGS, {"document_id": document_id})
        self.conn.executemany(
            sql.INSERT_TAG,
            [{"document_id": document_id, "key": k, "value": v} for k, v in document.tags],
        )


def _stored_spans(conn: apsw.Connection, revision_id: int) -> tuple[list[int], list[ChunkSpan]]:
    """The chunks of a stored revision as (chunk ids, spans), in order."""
    ids, spans = [], []
    for (
        chunk_id,
        ordinal,
        heading,
        char_start,
        char_end,
        line_start,
        line_end,
        text,
    ) in conn.execute(sql.SELECT_STORED_CHUNKS, {"revision_id": revision_id}):
        ids.append(chunk_id)
        spans.append(
            ChunkSpan(
                ordinal, tuple(json.loads(heading)), char_start, char_end, line_start, line_end,
                text,
            )
        )  # fmt: skip
    return ids, spans


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
    """Lines as the chunker numbers them: a break is \\r\\n, \\r or \\n."""
    if not text:
        return 0
    breaks = text.count("\n") + text.count("\r") - text.count("\r\n")
    return breaks + (0 if text.endswith(("\n", "\r")) else 1)
