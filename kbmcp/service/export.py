"""`kbmcp export`: knowledge bases and memory stores as JSONL (kbmcp/service/jsonl_format.py,
docs/export-format.md).

Streamed from one read snapshot (a consistent export while servers write), a page of documents
and one revision at a time: memory stays flat whatever the size. The order depends on the data
only (stores by id, documents by path, revisions by number), and nothing time-dependent is
written, so exporting the same data twice (from either backend) gives the same bytes. Never
written: token secrets (nor their hashes: tokens are not exported), the id key, files' signatures
(a re-add after an import reads the files again and finds them unchanged by content).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbmcp.access import ADMIN, Principal
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.service.jsonl_format import COUNTED, FORMAT, HEADER_TYPE, dump_line, encode_vector
from kbmcp.store.transfer import DocumentRow, RevisionRow, StoreRow
from kbmcp.workspace import Workspace

PAGE = 200
PROGRESS_SECONDS = 2.0
DOCUMENT_TYPE = {"documents": "document", "memories": "memory"}
STORE_TYPE = {"documents": "knowledge_base", "memories": "memory_store"}

Write = Callable[[str], object]
Progress = Callable[[str], None]


@dataclass
class ExportReport:
    counts: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def export_jsonl(
    workspace: Workspace,
    principal: Principal,
    write: Write,
    *,
    stores: Sequence[str] = (),
    with_vectors: bool = False,
    with_tenants: bool = False,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the export line by line through `write`. `stores`: knowledge bases or memory
    stores by name or id (default: all). The local operator's (ADMIN): every tenant's data."""
    principal.require(ADMIN)
    started = time.perf_counter()
    store, conn = workspace.store, workspace.conn
    report = ExportReport()
    meter = _Meter(progress, report)

    def emit(kind: str, line: dict[str, Any]) -> None:
        write(dump_line({"type": kind, **line}))
        report.counts[kind] += 1

    with store.read_snapshot(conn):
        chosen = _chosen(store.transfer.stores(conn), stores)
        model = store.vectors.recorded_model(conn) if with_vectors else None
        write(
            dump_line(
                {
                    "type": HEADER_TYPE,
                    "format": FORMAT,
                    "with_vectors": with_vectors,
                    "with_tenants": with_tenants,
                    "model": None if model is None else model.__dict__,
                }
            )
        )
        if with_tenants:
            for tenant in store.transfer.tenants(conn):
                emit("tenant", {"id": tenant.public_id, "name": tenant.name,
                                "created_at": tenant.created_at})  # fmt: skip
        for kb in chosen:
            emit(STORE_TYPE[kb.kind], _store_line(kb))
            after: str | None = None
            while page := store.transfer.documents(conn, kb.id, after, PAGE):
                for document in page:
                    emit(DOCUMENT_TYPE[kb.kind], _document_line(workspace, kb, document))
                    for revision in store.transfer.revisions(conn, kb.id, document.id):
                        emit("revision", _revision_line(workspace, kb, document, revision))
                        if model is not None:
                            for chunk_id, blob in store.transfer.stored_vectors(
                                conn, kb.id, revision.id
                            ):
                                emit("vector", {"chunk": chunk_id,
                                                "embedding": encode_vector(blob)})  # fmt: skip
                    meter.tick()
                after = page[-1].path
        if with_tenants:
            for share in store.transfer.shares(conn, [kb.id for kb in chosen]):
                emit("share", share.__dict__)
    counts = {kind: report.counts[kind] for kind in COUNTED}
    write(dump_line({"type": "end", "counts": counts}))
    report.seconds = time.perf_counter() - started
    meter.done()
    return report


def _chosen(every: list[StoreRow], refs: Sequence[str]) -> list[StoreRow]:
    """The stores named by `refs` (name or id; a name several tenants use is an error listing
    the ids), in export order; every store without refs."""
    if not refs:
        return every
    wanted: set[str] = set()
    for ref in refs:
        text = ref.strip()
        found = [kb for kb in every if text in (kb.public_id, kb.name)]
        if not found:
            raise ResourceUnavailable(
                f"--kb: no knowledge base or memory store {text!r} (see `kbmcp kb list`)",
                details={"argument": "kb", "value": ref},
            )
        if len(found) > 1:
            ids = ", ".join(f"{kb.public_id} ({kb.tenant})" for kb in found)
            raise InvalidRequest(
                f"--kb: {text!r} names several knowledge bases or stores: {ids}; pass an id",
                details={"argument": "kb", "value": ref},
            )
        wanted.add(found[0].public_id)
    return [kb for kb in every if kb.public_id in wanted]


def _store_line(kb: StoreRow) -> dict[str, Any]:
    return {
        "id": kb.public_id,
        "tenant": kb.tenant,
        "name": kb.name,
        "description": kb.description,
        "tags": kb.tags,
        "created_at": kb.created_at,
        "updated_at": kb.updated_at,
    }


def _document_line(workspace: Workspace, kb: StoreRow, document: DocumentRow) -> dict[str, Any]:
    tags = workspace.store.transfer.document_tags(workspace.conn, kb.id, document.id)
    return {
        "id": document.public_id,
        "store": kb.public_id,
        "path": document.path,
        "title": document.title,
        "kind": document.kind,
        "source": document.source,
        "metadata": document.metadata,
        "tags": [list(pair) for pair in tags],
        "status": document.status,
        "current_revision": document.current_revision,
        "attributes_hash": document.attributes_hash,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
    }


def _revision_line(
    workspace: Workspace, kb: StoreRow, document: DocumentRow, revision: RevisionRow
) -> dict[str, Any]:
    chunks = []
    for chunk in workspace.store.transfer.chunks(workspace.conn, kb.id, revision.id):
        item: dict[str, Any] = {
            "id": chunk.public_id,
            "ordinal": chunk.ordinal,
            "heading_path": chunk.heading_path,
            "char_start": chunk.char_start,
            "char_end": chunk.char_end,
            "line_start": chunk.line_start,
            "line_end": chunk.line_end,
        }
        if revision.content[chunk.char_start : chunk.char_end] != chunk.text:
            item["text"] = chunk.text
        chunks.append(item)
    return {
        "id": revision.public_id,
        "document": document.public_id,
        "number": revision.number,
        "content": revision.content,
        "content_hash": revision.content_hash,
        "char_count": revision.char_count,
        "line_count": revision.line_count,
        "created_at": revision.created_at,
        "chunks": chunks,
    }


class _Meter:
    """A progress line at most every PROGRESS_SECONDS, and one at the end."""

    def __init__(self, say: Progress | None, report: ExportReport) -> None:
        self._say = say
        self._report = report
        self._shown = time.perf_counter()

    def tick(self) -> None:
        if self._say is None or time.perf_counter() - self._shown < PROGRESS_SECONDS:
            return
        self._shown = time.perf_counter()
        self._say(self._line())

    def done(self) -> None:
        if self._say is not None:
            self._say(self._line() + f" in {self._report.seconds:.1f}s")

    def _line(self) -> str:
        counts = self._report.counts
        return (
            f"exported {counts['document']} documents, {counts['memory']} memories, "
            f"{counts['revision']} revisions"
            + (f", {counts['vector']} vectors" if counts["vector"] else "")
        )
