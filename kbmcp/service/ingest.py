"""`kbmcp add`: files and folders in, documents, revisions, chunks and index entries out.

What is read is decided by `kbmcp.ingest.walker` (formats, ignore files, --include/--exclude) and
`kbmcp.ingest.reader` (text, HTML, PDF); every file left out is counted by reason. Changed
documents are embedded and written in batches by `kbmcp.service.ingest_batch`: an interrupted
ingest never leaves a half-indexed document. A document whose content is unchanged but whose
title, tags, metadata, source or archived status changed is updated in place on its current
revision: revisions are content snapshots.

One file, one document, one path whatever the order of adds: a file's path is relative to the
outermost added folder that holds it, and adding a folder around one added before moves that
one's documents first (`kbmcp.service.ingest_places`). An unchanged file is found by its
recorded signature without being opened (`kbmcp.store.ingest`).

`add_documents` (defined in `kbmcp.service.ingest_documents`, importable from here) is the same
write path for documents given as text, optionally with their vectors.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbmcp.access import WRITE, Principal, readable_kb_ids
from kbmcp.clock import now_iso
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.ids import check_id, is_valid_id
from kbmcp.ingest import parsing
from kbmcp.ingest.chunker import ChunkingOptions, ChunkSpan, chunk_document, chunking_signature
from kbmcp.ingest.parsing import ParsedDocument, parse_document
from kbmcp.ingest.reader import extract, extraction_version, file_signature, read_file
from kbmcp.ingest.walker import (
    NAME_NOT_UTF8,
    Scope,
    Selection,
    SourceFile,
    WalkReport,
    is_utf8,
    iter_source_files,
    shown_path,
)
from kbmcp.service.ingest_batch import IngestBatch, KnownDocument, PendingDocument, sha256
from kbmcp.service.ingest_carry import Carry
from kbmcp.service.ingest_places import KnownDocuments, apply_moves
from kbmcp.service.ingest_progress import IngestProgress, ProgressTracker
from kbmcp.store.catalog import DEFAULT_KB, KnowledgeBaseRef, TenantRef, dump_json
from kbmcp.store.ingest import FileSignature, RecordedFile
from kbmcp.wording import counted
from kbmcp.workspace import Workspace, holding_lock

# progress(files done, files total): a file is done when it is skipped, unchanged, or its
# vectors are computed.
Progress = Callable[[int, int], None]

DUPLICATE = "duplicate path"
PATH_TAKEN = "path taken by another file"
FAILED = "failed (see errors)"


@dataclass(frozen=True)
class IngestOptions:
    knowledge_base: str = DEFAULT_KB
    tags: Sequence[tuple[str, str]] = ()
    metadata: Sequence[tuple[str, str]] = ()
    prune: bool = False
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)
    selection: Selection = field(default_factory=Selection)


@dataclass
class IngestReport:
    knowledge_base_id: str = ""
    knowledge_base: str = ""
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    archived: int = 0
    moved: int = 0  # documents moved to paths under a folder added around their own
    skipped: Counter[str] = field(default_factory=Counter)
    chunks_indexed: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Files found but not written because `interrupt` asked (add_paths): sync them later.
    deferred: list[Path] = field(default_factory=list)

    def summary_line(self) -> str:
        skipped = sum(self.skipped.values())
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.skipped.items()))
        return (
            f"{self.knowledge_base}: added {self.added}, updated {self.updated}, "
            f"unchanged {self.unchanged}, archived {self.archived}, "
            f"{f'moved {self.moved}, ' if self.moved else ''}"
            f"skipped {skipped}{f' ({reasons})' if reasons else ''}; "
            f"{counted(self.chunks_indexed, 'chunk')} indexed ({self.chunks_embedded} embedded) "
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
            "moved": self.moved,
            "skipped": dict(sorted(self.skipped.items())),
            "chunks_indexed": self.chunks_indexed,
            "chunks_embedded": self.chunks_embedded,
            "seconds": round(self.seconds, 3),
            "warnings": self.warnings,
            "errors": self.errors,
        }

    def fail(self, path: str, error: Exception) -> None:
        """A file that could not be indexed: an error naming it (the run goes on)."""
        self.skipped[FAILED] += 1
        self.errors.append(f"{path}: not indexed ({type(error).__name__}: {error})")

    def take(self, counts: Counter[str]) -> None:
        self.added += counts["added"]
        self.updated += counts["updated"]
        self.unchanged += counts["unchanged"]
        self.chunks_indexed += counts["chunks"]
        self.chunks_embedded += counts["embedded"]


def add_paths(
    workspace: Workspace,
    principal: Principal,
    paths: Sequence[Path],
    options: IngestOptions = IngestOptions(),
    progress: Progress | None = None,
    *,
    scope: Scope | None = None,
    interrupt: Callable[[], bool] | None = None,
    on_progress: Callable[[IngestProgress], None] | None = None,
    carry: Carry | None = None,
) -> IngestReport:
    """Ingest files and folders into a knowledge base of the principal's tenant (created if new).

    A path that does not exist is an `InvalidRequest` before anything is written. `scope`: only
    these files and folders under `paths` (what a watch saw change) are looked at, and only
    documents of files in it are pruned. `interrupt`: asked between files and embedding slices
    (once some work is done); when it returns True, what is ready is committed and the files
    not written yet are listed in `report.deferred` instead (a watch syncs a newer change first).
    `carry` (kbmcp/service/ingest_carry.py): the work already done for deferred files is kept
    there, and taken from there by the sync that writes them, so no file is extracted twice.
    `on_progress` gets an `IngestProgress` (files, bytes and chunks, the file being embedded)
    after every file and every embedding slice; `progress(files done, files total)` is the
    older, per-file form.
    """
    principal.require(WRITE)
    kb_name = kb_name_of(options.knowledge_base)
    check_paths(paths)
    started = time.perf_counter()
    workspace.ensure_model()
    with workspace.lock:
        kb = ensure_kb(workspace, principal, kb_name)
        known = KnownDocuments.load(workspace, kb)
    report = IngestReport(knowledge_base_id=kb.public_id, knowledge_base=kb.name)
    walk = WalkReport()
    walked = iter_source_files(list(paths), walk, options.selection, scope)
    files = _move_documents(workspace, known, [known.place(f) for f in walked], report)
    report.errors.extend(walk.errors)
    report.skipped.update(walk.skipped)
    report.warnings.extend(
        f"{path}: the name is not UTF-8, skipped (rename it, e.g. convmv -f latin1 -t utf8)"
        for path, reason in walk.skipped_paths
        if reason == NAME_NOT_UTF8
    )
    counts = Counter[str]()
    processed = 0
    tracker = None if on_progress is None else ProgressTracker([f.path for f in files], on_progress)

    def show() -> None:
        if progress:
            progress(processed - batch.not_ready, len(files))
        if tracker is not None:
            tracker.report(batch.in_progress, counts["embedded"])

    def pages_read(done: int, total: int) -> None:
        if tracker is not None:
            tracker.read_pages(done, total)
            show()

    batch = IngestBatch(workspace, kb, counts, on_ready=show, keep_going=True, interrupt=interrupt)
    batch.drop_stale_staged()
    seen: set[str] = set()
    for index, source in enumerate(files):
        if batch.should_stop(progressed=processed > 0):
            report.deferred.extend(later.path for later in files[index:])
            break
        if tracker is not None:
            tracker.read(source.path)
            show()  # the file is named while it is read (a large PDF takes minutes)
        try:
            on_page = None if tracker is None else pages_read
            pending = _prepare(source, options, known, seen, report, batch, carry, on_page=on_page)
        except Exception as error:  # one file's failure never loses the others (a bug, a hostile
            # file): it is reported and the run goes on
            report.fail(str(source.path), error)
            pending = None
        if tracker is not None:
            tracker.saw(source.path)
        if pending is not None:
            batch.queue(pending)
        processed += 1
        show()
    batch.flush()
    report.deferred.extend(Path(d.source) for d in batch.pending if d.source is not None)
    if carry is not None:
        carry.keep(batch.pending, batch.unwritten_vectors)
    report.take(counts)
    for failure in batch.failures:
        report.fail(failure.source or failure.path, failure.error)
    if progress:
        progress(len(files), len(files))
    if tracker is not None:
        tracker.finish(counts["embedded"])
    if options.prune and walk.errors:
        report.warnings.append("--prune skipped: some folders could not be read (see errors)")
    elif options.prune:
        with workspace.lock:
            report.archived = _prune(workspace, kb, paths, seen, scope, report.deferred)
    report.seconds = time.perf_counter() - started
    return report


@holding_lock
def archive_document(workspace: Workspace, principal: Principal, document_id: str) -> None:
    """Take a published document out of the search indexes (its revisions stay readable by id;
    adding its file again restores it). Needs the write scope; a document the principal cannot
    read, or that is not published, is `resource_unavailable`."""
    principal.require(WRITE)
    public_id = check_id("document", document_id, argument="document_id")
    conn = workspace.conn
    readable = readable_kb_ids(workspace.store, conn, principal)
    row_id = workspace.store.ingest.archivable_document(conn, public_id, readable)
    if row_id is None:
        raise ResourceUnavailable(
            f"document {public_id} does not exist, is not readable or is not published",
            details={"argument": "document_id", "document_id": public_id},
        )
    archive_row(workspace, row_id)


def archive_row(workspace: Workspace, document_id: int) -> None:
    """Archive the document (or memory) with this row id, in one transaction: out of the
    indexes, status 'archived', updated now."""
    store, conn = workspace.store, workspace.conn
    with store.write_transaction(conn):
        revision_id = store.ingest.current_revision_for_update(conn, document_id)
        if revision_id is not None:
            chunk_ids = store.index.chunk_ids_of_revision(conn, revision_id)
            store.index.remove_from_index(conn, chunk_ids)
        store.catalog.archive_document(conn, document_id, now_iso())


_DOCUMENTS_API = ("DocumentInput", "add_documents")


def __getattr__(name: str) -> Any:
    """`from kbmcp.service.ingest import add_documents, DocumentInput`: resolved on first use,
    since kbmcp.service.ingest_documents builds on this module."""
    if name in _DOCUMENTS_API:
        from kbmcp.service import ingest_documents

        return getattr(ingest_documents, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- helpers


def _move_documents(
    workspace: Workspace, known: KnownDocuments, files: list[SourceFile], report: IngestReport
) -> list[SourceFile]:
    """Move the documents of files that lie under a folder added around the one they were
    added from to their new paths (the add-order rule, kbmcp/service/ingest_places.py); returns
    the files with the paths their documents have."""
    files, moves = known.plan_moves(files, report.warnings)
    if not moves:
        return files
    with workspace.lock:
        moved = apply_moves(workspace, moves)
    if moved:
        known.moved(moves)
        report.moved = len(moves)
        return files
    report.warnings.append(
        f"{len(moves)} documents were not moved under the added folder: another process "
        "changed them meanwhile; add the folder again to move them"
    )
    kept = {move.source.path: move.old_path for move in moves}
    return [
        dataclasses.replace(f, relative_path=kept[f.path]) if f.path in kept else f for f in files
    ]


def kb_name_of(name: str) -> str:
    name = name.strip()
    if not name:
        raise InvalidRequest(
            "the knowledge base name must not be empty", details={"argument": "knowledge_base"}
        )
    return name


def ensure_kb(workspace: Workspace, principal: Principal, name: str) -> KnowledgeBaseRef:
    """The principal's knowledge base with this id (kb_...) or name; a new name creates one.
    An id that is not one of the tenant's knowledge bases is `resource_unavailable`, whether it
    exists elsewhere or not, never a new knowledge base named like it."""
    store, conn = workspace.store, workspace.conn
    tenant = TenantRef(principal.tenant_id, principal.tenant_public_id)
    if is_valid_id("knowledge_base", name):
        found = store.catalog.find_knowledge_base_by_id(conn, tenant, name)
        if found is None:
            raise ResourceUnavailable(
                f"no knowledge base of this tenant has id {name} (`kbmcp ls` lists them; "
                "another tenant's: --tenant)",
                details={"argument": "knowledge_base", "value": name},
            )
        return found
    with store.write_transaction(conn):
        return store.catalog.ensure_knowledge_base(conn, tenant, name)


def check_paths(paths: Sequence[Path]) -> None:
    if not paths:
        raise InvalidRequest("no paths to add", details={"argument": "paths"})
    not_utf8 = [shown_path(path) for path in paths if not is_utf8(str(path))]
    if not_utf8:
        raise InvalidRequest(
            f"path is not valid UTF-8: {', '.join(not_utf8)}",
            details={"argument": "paths", "not_utf8": not_utf8},
        )
    missing = [str(path) for path in paths if not path.expanduser().exists()]
    if missing:
        raise InvalidRequest(
            f"no such file or folder: {', '.join(missing)}",
            details={"argument": "paths", "missing": missing},
        )


def _prepare(
    source: SourceFile,
    options: IngestOptions,
    known: KnownDocuments,
    seen: set[str],
    report: IngestReport,
    batch: IngestBatch,
    carry: Carry | None = None,
    *,
    on_page: Callable[[int, int], None] | None = None,
) -> PendingDocument | None:
    """Decide about one file: skip it, leave it unchanged, refresh it in place (same content,
    other attributes) or queue a new revision (chunked here). A file deferred by an earlier
    sync is not extracted again (`carry`). `on_page`: a PDF's extraction progress (pages done,
    pages).

    An unchanged file is found without opening it when its signature (size, mtime_ns, inode)
    is the one recorded, and without extracting it when its bytes hash is (docs/ingest.md)."""
    other = known.other_file_at(source)
    if other is not None:
        report.skipped[PATH_TAKEN] += 1
        report.warnings.append(
            f"{source.path}: path {source.relative_path!r} is already the document of {other}, "
            "which still exists; skipped (add their common parent folder, or use another --kb)"
        )
        return None
    if source.relative_path in seen:
        report.skipped[DUPLICATE] += 1
        report.warnings.append(
            f"{source.path}: path {source.relative_path!r} was already added in this run; skipped"
        )
        return None
    previous = known.get(source.relative_path)
    key = read_key(source.kind, options)
    recorded = known.recorded_file(source, key)
    if recorded is not None:
        signature = file_signature(source.path)
        if signature is not None and unchanged_by_signature(recorded, signature):
            seen.add(source.relative_path)  # never opened
            report.unchanged += 1
            if recorded.folder != source.folder:  # now found in an added folder, or named
                batch.refresh_file(
                    source.relative_path,
                    dataclasses.replace(recorded, folder=source.folder),
                    previous.content_hash if previous is not None else None,
                )
            return None
    file = read_file(source.path)
    if recorded is not None and previous is not None and file.same_bytes(recorded):
        # Touched, checked out again or copied over with the same bytes: unchanged; only the
        # signature is recorded anew.
        seen.add(source.relative_path)
        report.unchanged += 1
        batch.refresh_file(
            source.relative_path, file.recorded(key, source.folder), previous.content_hash
        )
        return None
    carried = None if carry is None else carry.take(str(source.path), file, key)
    extracted = extract(source, file, on_page) if carried is None else carried.extracted
    if extracted.content is None:
        report.skipped[extracted.reason or "unreadable"] += 1
        return None
    seen.add(source.relative_path)
    parsed = parse_document(
        extracted.content, source.relative_path, extracted.kind, extracted.title
    )
    if parsed.warning:
        report.warnings.append(f"{source.path}: {parsed.warning}")
    tags = sorted(set(parsed.tags) | set(options.tags))
    metadata = {**parsed.metadata, **dict(options.metadata)}
    pending = pending_document(
        source.relative_path,
        str(source.path),
        extracted.content,
        parsed,
        tags,
        metadata,
        previous,
        options.chunking,
    )
    if pending is None:
        report.unchanged += 1
        batch.refresh_file(
            source.relative_path, file.recorded(key, source.folder), sha256(extracted.content)
        )
    else:  # (with the same content too: the stored chunks may come from other rules or sizes)
        pending.spans = chunk_document(pending.content, parsed.kind, options.chunking)
        pending.file = file.recorded(key, source.folder)
        pending.extracted = extracted
        if carried is not None:
            pending.carried_vectors = carried.vectors
    return pending


def read_key(kind: str, options: IngestOptions) -> str:
    """What decides a file's document besides its bytes: its kind, the versions of that kind's
    extraction and of parsing (title, front matter), --tag, --meta and the chunking rules. A
    recorded file read with another key is read again."""
    versions = (kind, extraction_version(kind), parsing.PARSING_VERSION)
    tags = tuple(sorted(set(options.tags)))
    metadata = tuple(sorted(dict(options.metadata).items()))
    return _read_key(versions, tags, metadata, tuple(chunking_signature(options.chunking)))


@functools.lru_cache(maxsize=64)  # (the same few keys for every file of a run)
def _read_key(versions: tuple, tags: tuple, metadata: tuple, chunking: tuple) -> str:
    return sha256(dump_json([list(versions), list(tags), list(metadata), list(chunking)]))


def unchanged_by_signature(recorded: RecordedFile, signature: FileSignature) -> bool:
    """The file-signature rule: the file is unchanged, without opening it, when its size,
    mtime_ns and inode are those recorded and the recorded signature was taken at least a
    timestamp granularity after the file's last modification (else a later write could have
    kept the same size and mtime)."""
    return recorded.signature.trusted and signature.same_file_as(recorded.signature)


def pending_document(
    path: str,
    source: str | None,
    content: str,
    parsed: ParsedDocument,
    tags: list[tuple[str, str]],
    metadata: dict[str, Any],
    previous: KnownDocument | None,
    chunking: ChunkingOptions,
    given_vectors: list[bytes] | None = None,
    spans: list[ChunkSpan] | None = None,
) -> PendingDocument | None:
    """The document to write, or None when it is unchanged. The attributes hash covers how the
    document is chunked, so new chunking rules or sizes reach unchanged files too."""
    signature = chunking_signature(chunking)
    attributes_hash = sha256(dump_json([parsed.title, parsed.kind, tags, metadata, signature]))
    content_hash = sha256(content)
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
        and previous.source == source
    ):
        return None
    pending = PendingDocument(
        path, source, content, content_hash, parsed, tags, metadata, attributes_hash, previous
    )
    # Same content: the current revision (and its chunks) is kept if its chunks are those of
    # `spans` (decided when queued); otherwise a new revision is chunked anew.
    pending.reuse_revision = same_content
    pending.spans = spans or []
    pending.given_vectors = given_vectors
    pending.chunking = dump_json(signature)
    return pending


def _prune(
    workspace: Workspace,
    kb: KnowledgeBaseRef,
    paths: Sequence[Path],
    seen: set[str],
    scope: Scope | None,
    deferred: list[Path],
) -> int:
    """Archive published documents whose source file lies under an added folder (and in the
    scope) but was not found this run (deleted, now ignored, or no longer readable); a file
    deferred by an interrupt was found."""
    later = {str(path) for path in deferred}
    roots = [str(p.expanduser().resolve()) for p in paths if p.expanduser().is_dir()]
    if not roots:
        return 0
    archived = 0
    for document in workspace.store.catalog.document_states(workspace.conn, kb.id):
        source = document.source
        if document.status != "published" or document.path in seen or source is None:
            continue
        if source in later or not any(source.startswith(root + os.sep) for root in roots):
            continue
        if scope is not None and not scope.covers(Path(source)):
            continue
        archive_row(workspace, document.id)
        archived += 1
    return archived
