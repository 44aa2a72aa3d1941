"""Writing documents for ingest: embed what changed in batches, write each batch of whole
documents in one short transaction.

The workspace lock is held while the connection is used and never while embedding (the rule in
docs/architecture.md): a server that ingests (`serve --watch`) keeps answering searches while a
batch embeds. Within a batch, vectors are computed in slices of EMBED_SLICE inputs in document
order, so per-file progress moves while a batch embeds instead of jumping once per batch.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import apsw

from kbmcp.clock import now_iso
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import KbError
from kbmcp.ids import IdKey
from kbmcp.ingest.chunker import ChunkSpan
from kbmcp.ingest.parsing import ParsedDocument
from kbmcp.store import catalog as sql
from kbmcp.store.catalog import KnowledgeBaseRef, dump_json
from kbmcp.store.connection import write_transaction
from kbmcp.store.disk_full import is_disk_full
from kbmcp.store.id_key import id_key_of
from kbmcp.store.index import IndexRow, add_to_index, chunk_ids_of_revision, remove_from_index
from kbmcp.store.source_files import FileRefresh, RecordedFile, record_file, refresh_files
from kbmcp.store.vectors import check_model, drop_stored_vectors, store_vectors, to_blob
from kbmcp.workspace import Workspace

# Chunks collected before one write transaction: big enough that the file is not rewritten once
# per small document, small enough that memory stays flat and other writers wait little.
EMBED_BATCH_CHUNKS = 256
# Inputs per embedding call: the default model's own batch size, so a call costs ~1 s on two
# cores and progress moves about that often.
EMBED_SLICE = 32


@dataclass(frozen=True)
class KnownDocument:
    """A document as it stood when the run started: enough to decide skip / update."""

    title: str
    status: str
    source: str | None
    attributes_hash: str
    revision_id: int | None
    content_hash: str | None


@dataclass
class PendingDocument:
    """A document that needs writing.

    `path` / `source`: its path in the knowledge base and the file it came from (None for
    documents given as text). `reuse_revision`: the content equals the current revision's (only
    its title, tags, metadata, source or archived status changed), so the document is refreshed
    in place on that revision's chunks (`spans`, `chunk_ids`, loaded when queued) instead of
    getting a new revision; when the stored chunks differ from `spans` (chunked by other rules or
    sizes), it gets a new revision after all. `given_vectors`: precomputed vectors, one per span.
    """

    path: str
    source: str | None
    content: str
    content_hash: str
    parsed: ParsedDocument
    tags: list[tuple[str, str]]
    metadata: dict[str, Any]
    attributes_hash: str
    known: KnownDocument | None
    reuse_revision: bool = False
    spans: list[ChunkSpan] = field(default_factory=list)
    chunk_ids: list[int] = field(default_factory=list)  # with reuse_revision: ids of `spans`
    given_vectors: list[bytes] | None = None
    ready: bool = False  # its vectors are computed (progress counts it as done)
    failed: bool = False  # it could not be embedded or written (IngestBatch.keep_going)
    file: RecordedFile | None = None  # the file it was read from (None: given as text)

    @functools.cached_property
    def embedding_inputs(self) -> list[str]:
        return [
            chunk_embedding_input(self.parsed.title, span.heading_path, span.text)
            for span in self.spans
        ]


@dataclass(frozen=True)
class Failure:
    """A document left out of a batch because embedding or writing it failed."""

    path: str
    source: str | None
    error: Exception


# Failures of the database itself, not of one document: they end the batch (rolled back whole).
DATABASE_ERRORS = (
    KbError,
    apsw.FullError,
    apsw.IOError,
    apsw.BusyError,
    apsw.LockedError,
    apsw.ReadOnlyError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.CantOpenError,
    apsw.InterruptError,
    apsw.NoMemError,
)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class IngestBatch:
    """Collects changed documents, embeds them in batches, and writes each batch of whole
    documents in one short transaction. `on_ready` is called whenever more documents have their
    vectors (for progress)."""

    def __init__(
        self,
        workspace: Workspace,
        kb: KnowledgeBaseRef,
        counts: Counter[str],
        on_ready: Callable[[], None] | None = None,
        *,
        public_id_of: Callable[[str], str] | None = None,
        keep_going: bool = False,
    ) -> None:
        self.workspace = workspace
        # keep_going: a document that fails to embed or to write (a bug, a hostile file) is
        # left out and recorded in `failures`, the others are written; otherwise it raises.
        self.keep_going = keep_going
        self.failures: list[Failure] = []
        # The public id a new document gets from its path: doc_... from the knowledge base and
        # the path by default (kbmcp/ids.py); memories pass their own rule.
        self.public_id_of = public_id_of or (
            lambda path: self.ids.make("document", kb.public_id, path)
        )
        self.conn = workspace.conn
        self.kb = kb
        self.counts = counts  # added, updated, unchanged, chunks, embedded: after each commit
        self.on_ready = on_ready
        self.pending: list[PendingDocument] = []
        self.pending_chunks = 0
        self.refreshes: list[FileRefresh] = []  # files found unchanged, recorded anew

    @functools.cached_property
    def ids(self) -> IdKey:
        """The file's id key (it never changes), read at the first write."""
        return id_key_of(self.conn)

    @property
    def not_ready(self) -> int:
        return sum(not document.ready for document in self.pending)

    def queue(self, document: PendingDocument) -> None:
        if document.reuse_revision and document.known and document.known.revision_id:
            with self.workspace.lock:
                ids, stored = stored_spans(self.conn, document.known.revision_id)
            if _same_chunks(stored, document.spans):
                # Refreshed in place on the current revision's chunks and vectors.
                document.chunk_ids, document.spans = ids, stored
                document.given_vectors = None
            else:
                # Same content, other chunking (new rules or sizes): a new revision, chunked
                # anew; vectors of chunks whose input is unchanged are reused.
                document.reuse_revision = False
        self.pending.append(document)
        self.pending_chunks += len(document.spans)
        if self.pending_chunks >= EMBED_BATCH_CHUNKS:
            self.flush()

    def refresh_file(self, path: str, file: RecordedFile | None, content_hash: str | None) -> None:
        """Record the file of the document at `path`, found unchanged (holding `content_hash`),
        with the next write."""
        if file is not None and content_hash is not None:
            self.refreshes.append(FileRefresh(path, file, content_hash))

    def flush(self) -> None:
        """Embed what the pending documents need, then write them in one transaction: a batch
        is committed whole or not at all, so no document is ever half-written."""
        if not self.pending and not self.refreshes:
            return
        vectors = self._vectors_for(self.pending)
        written = Counter[str]()
        with self.workspace.lock, write_transaction(self.conn):
            refresh_files(self.conn, self.kb.id, self.refreshes)
            # `kbmcp reembed` may have switched the model while these vectors were computed.
            if self.pending:
                check_model(self.conn, self.workspace.embedder.fingerprint)
            for document in self.pending:
                if document.failed:
                    continue
                written_one = self._write_kept(document, vectors)
                if written_one is not None:
                    outcome, chunks_indexed = written_one
                    written[outcome] += 1
                    written["chunks"] += chunks_indexed
        # Counted after the commit: a rolled-back batch reports nothing.
        self.counts.update(written)
        self.pending = []
        self.pending_chunks = 0
        self.refreshes = []

    def _write_kept(
        self, document: PendingDocument, vectors: dict[str, bytes]
    ) -> tuple[str, int] | None:
        """`_write`, inside a savepoint when `keep_going`: a document whose write fails leaves
        nothing behind and is recorded as a failure (None); a failure of the database itself
        (disk full, I/O, locked, another model) still ends the batch."""
        if not self.keep_going:
            return self._write(document, vectors)
        try:
            with self.conn:  # a savepoint inside the batch's transaction
                return self._write(document, vectors)
        except DATABASE_ERRORS:
            raise
        except Exception as error:
            if is_disk_full(error):  # sqlite-vec's full disk is a plain SQLError
                raise
            self._fail(document, error)
            return None

    def _fail(self, document: PendingDocument, error: Exception) -> None:
        document.failed = True
        self.failures.append(Failure(document.path, document.source, error))

    def _embed(self, texts: list[str], documents: list[PendingDocument]) -> list[bytes | None]:
        """Vectors of `texts`. With `keep_going`, a failing call is retried text by text and
        the documents of the texts that fail alone are failed. When every text fails alone (the
        embedder itself is broken), or none does (the failure was not about a text), the first
        error is raised."""
        try:
            return [to_blob(row) for row in self.workspace.embedder.embed(texts)]
        except KbError:
            raise
        except Exception as first:
            if not self.keep_going:
                raise
            found: list[bytes | None] = []
            failed: dict[str, Exception] = {}
            for text in texts:
                try:
                    found.append(to_blob(self.workspace.embedder.embed([text])[0]))
                except Exception as error:
                    found.append(None)
                    failed[text] = error
            if len(failed) in (0, len(texts)):
                raise first from None
            for document in documents:
                error = next((failed[t] for t in document.embedding_inputs if t in failed), None)
                if error is not None and not document.failed:
                    self._fail(document, error)
            return found

    def _vectors_for(self, documents: list[PendingDocument]) -> dict[str, bytes]:
        """Vectors keyed by embedding input: given ones, reused ones from the previous revision
        where a chunk's input is unchanged, and the rest computed in slices (no lock held)."""
        vectors: dict[str, bytes] = {}
        with self.workspace.lock:
            for document in documents:
                if document.known and document.known.revision_id is not None:
                    vectors.update(self._previous_vectors(document.known))
        for document in documents:
            if document.given_vectors is not None:
                vectors.update(zip(document.embedding_inputs, document.given_vectors, strict=True))
        # In document order, so files complete one after another and progress moves per file
        # (sorted by length across the batch, no file would be complete until the last slice).
        missing = list(
            dict.fromkeys(t for d in documents for t in d.embedding_inputs if t not in vectors)
        )
        self._mark_ready(documents, vectors)
        for start in range(0, len(missing), EMBED_SLICE):
            texts = missing[start : start + EMBED_SLICE]
            embedded = self._embed(texts, documents)
            vectors.update((t, v) for t, v in zip(texts, embedded, strict=True) if v is not None)
            self.counts["embedded"] += sum(v is not None for v in embedded)
            self._mark_ready(documents, vectors)
        return vectors

    def _mark_ready(self, documents: list[PendingDocument], vectors: dict[str, bytes]) -> None:
        changed = False
        for document in documents:
            if document.failed and not document.ready:
                document.ready = changed = True  # done, for progress: it will not be written
            elif not document.ready and all(t in vectors for t in document.embedding_inputs):
                document.ready = changed = True
        if changed and self.on_ready is not None:
            self.on_ready()

    def _previous_vectors(self, known: KnownDocument) -> dict[str, bytes]:
        rows = self.conn.execute(sql.SELECT_CHUNKS_WITH_VECTORS, {"revision_id": known.revision_id})
        return {
            chunk_embedding_input(known.title, json.loads(heading), text): embedding
            for heading, text, embedding in rows
        }

    def _write(self, document: PendingDocument, vectors: dict[str, bytes]) -> tuple[str, int]:
        """Write one document inside the batch's transaction; returns ('added', 'updated' or
        'unchanged', the number of chunks put into the indexes)."""
        conn = self.conn
        now = now_iso()
        # Re-read under the write lock: another process may have written this path meanwhile.
        row = conn.execute(
            sql.SELECT_DOCUMENT_FOR_UPDATE, {"kb_id": self.kb.id, "path": document.path}
        ).fetchone()
        if row is None:
            document_id, document_public_id = self._insert_document(document, now)
            revision_id = self._insert_revision(document, document_id, document_public_id, now)
            self._index_chunks(document, vectors)
            self._update_document(document, document_id, revision_id, now)
            record_file(conn, document_id, document.file)
            return "added", len(document.spans)
        (document_id, document_public_id, status, current_revision_id, content_hash,
         attributes_hash, source) = row  # fmt: skip
        if (status, content_hash, attributes_hash, source) == (
            "published",
            document.content_hash,
            document.attributes_hash,
            document.source,
        ):
            record_file(conn, document_id, document.file)
            return "unchanged", 0  # another process wrote exactly this since the run started
        known = document.known
        if (
            document.reuse_revision
            and known is not None
            and current_revision_id == known.revision_id
        ):
            reindexed = self._refresh(document, vectors, status)
            self._update_document(document, document_id, current_revision_id, now)
            record_file(conn, document_id, document.file)
            return "updated", len(document.spans) if reindexed else 0
        if current_revision_id is not None:
            old_chunk_ids = chunk_ids_of_revision(conn, current_revision_id)
            if status == "published":
                remove_from_index(conn, old_chunk_ids)
            drop_stored_vectors(conn, old_chunk_ids)
        revision_id = self._insert_revision(document, document_id, document_public_id, now)
        self._index_chunks(document, vectors)
        self._update_document(document, document_id, revision_id, now)
        record_file(conn, document_id, document.file)
        return "updated", len(document.spans)

    def _refresh(self, document: PendingDocument, vectors: dict[str, bytes], status: str) -> bool:
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

    def _insert_document(self, document: PendingDocument, now: str) -> tuple[int, str]:
        public_id = self.public_id_of(document.path)
        self.conn.execute(
            sql.INSERT_DOCUMENT,
            {
                "public_id": public_id,
                "kb_id": self.kb.id,
                "path": document.path,
                "title": document.parsed.title,
                "kind": document.parsed.kind,
                "source": document.source,
                "metadata": dump_json(document.metadata),
                "now": now,
            },
        )
        return self.conn.last_insert_rowid(), public_id

    def _insert_revision(
        self, document: PendingDocument, document_id: int, document_public_id: str, now: str
    ) -> int:
        """A new immutable revision and its chunks; sets `document.chunk_ids`."""
        conn = self.conn
        number = conn.execute(sql.NEXT_REVISION_NUMBER, {"document_id": document_id}).fetchone()[0]
        revision_public_id = self.ids.make("revision", document_public_id, number)
        conn.execute(
            sql.INSERT_REVISION,
            {
                "public_id": revision_public_id,
                "document_id": document_id,
                "number": number,
                "content": document.content,
                "content_hash": document.content_hash,
                "char_count": len(document.content),
                "line_count": line_count(document.content),
                "now": now,
            },
        )
        revision_id = conn.last_insert_rowid()
        chunk_ids = []
        for span in document.spans:
            conn.execute(
                sql.INSERT_CHUNK,
                {
                    "public_id": self.ids.make("chunk", revision_public_id, span.ordinal),
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

    def _index_chunks(self, document: PendingDocument, vectors: dict[str, bytes]) -> None:
        rows = self._index_rows(document, vectors)
        store_vectors(self.conn, [(row.chunk_id, row.embedding) for row in rows])
        add_to_index(self.conn, document.parsed.title, rows)

    @staticmethod
    def _index_rows(document: PendingDocument, vectors: dict[str, bytes]) -> list[IndexRow]:
        given = document.given_vectors
        return [
            IndexRow(
                chunk_id,
                span.heading_path,
                span.text,
                given[index] if given is not None else vectors[embedding_input],
            )
            for index, (chunk_id, span, embedding_input) in enumerate(
                zip(document.chunk_ids, document.spans, document.embedding_inputs, strict=True)
            )
        ]

    def _update_document(
        self, document: PendingDocument, document_id: int, revision_id: int, now: str
    ) -> None:
        """Attributes, current revision, published status and tags."""
        self.conn.execute(
            sql.UPDATE_DOCUMENT,
            {
                "document_id": document_id,
                "title": document.parsed.title,
                "kind": document.parsed.kind,
                "source": document.source,
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


def _same_chunks(stored: list[ChunkSpan], fresh: list[ChunkSpan]) -> bool:
    def shape(spans: list[ChunkSpan]) -> list[tuple]:
        return [(s.char_start, s.char_end, tuple(s.heading_path)) for s in spans]

    return shape(stored) == shape(fresh)


def stored_spans(conn: apsw.Connection, revision_id: int) -> tuple[list[int], list[ChunkSpan]]:
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


def line_count(text: str) -> int:
    """Lines as the chunker numbers them: a break is \\r\\n, \\r or \\n."""
    if not text:
        return 0
    breaks = text.count("\n") + text.count("\r") - text.count("\r\n")
    return breaks + (0 if text.endswith(("\n", "\r")) else 1)
