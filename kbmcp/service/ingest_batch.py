"""Writing documents for ingest: embed what changed, commit in small, bounded batches.

One mechanism bounds every write, at two scales:

- **Small documents** are gathered into a window of about EMBED_BATCH_CHUNKS chunks, embedded
  in slices of EMBED_SLICE inputs in document order, and committed whole (never half a
  document) as soon as they are ready: at the end of the window, and whenever COMMIT_SECONDS of
  embedding have passed since the last commit, so a file is searchable within about two seconds
  of its vectors being computed, however large the burst it came with.
- **A document with more chunks than one transaction may write** (`Settings.write_batch_chunks`,
  KBMCP_WRITE_BATCH_CHUNKS) is written in parts of that many chunks, each part in its own
  transaction as soon as it is embedded, and made current by a last short transaction
  (kbmcp/service/ingest_write.py `StagedWrite`): no write transaction holds the file's write lock
  for long, whatever the size of the document, and the document changes for readers at once.

The workspace lock is held while the connection is used and never while embedding (the rule in
docs/architecture.md): a server that ingests (`serve --watch`) keeps answering searches while a
batch embeds. An `interrupt` callback (a watch that has a newer change to sync) is asked between
slices: when it says so, what is ready is committed and the rest is left in `pending` for the
caller to defer; a huge document in progress is not interrupted (its next run would resume it).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from kbmcp.clock import format_timestamp, now
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import KbError
from kbmcp.service.ingest_write import (
    DocumentWriter,
    KnownDocument,
    Outcome,
    PendingDocument,
    StagedWrite,
    same_chunks,
    sha256,
    stored_spans,
)
from kbmcp.store.catalog import KnowledgeBaseRef
from kbmcp.store.ingest import FileRefresh, RecordedFile
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace

__all__ = ["IngestBatch", "KnownDocument", "PendingDocument", "sha256"]

# Chunks gathered before they are embedded: big enough that the file is not rewritten once per
# small document, small enough that memory stays flat and other writers wait little.
EMBED_BATCH_CHUNKS = 256
# Inputs per embedding call: the default model's own batch size, so a call costs ~1 s on two
# cores and progress moves about that often.
EMBED_SLICE = 32
# The longest documents that are ready wait for their commit while a batch embeds.
COMMIT_SECONDS = 2.0
# A batch's transaction that the database cancelled for a conflict with another one is run
# again, whole (nothing of it was committed): PostgreSQL cancels one of two transactions that
# wait for each other (SQLSTATE 40P01), and on Citus so does the cluster's deadlock detector,
# e.g. when a shard a batch writes moves to another node (`citus_rebalance_start()`, docs/
# scale-out.md). 40001: a serialization failure. SQLite's writers queue on its lock instead.
CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})
CONFLICT_ATTEMPTS = 3
# How long a revision written in parts may wait for a run to resume it before it is dropped.
STALE_STAGED_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Failure:
    """A document left out of a batch because embedding or writing it failed."""

    path: str
    source: str | None
    error: Exception


class IngestBatch:
    """Collects changed documents, embeds them, and commits them in small batches of whole
    documents (or, one too large for a transaction, in parts). `on_ready` is called whenever
    more documents have their vectors (for progress)."""

    def __init__(
        self,
        workspace: Workspace,
        kb: KnowledgeBaseRef,
        counts: Counter[str],
        on_ready: Callable[[], None] | None = None,
        *,
        public_id_of: Callable[[str], str] | None = None,
        keep_going: bool = False,
        interrupt: Callable[[], bool] | None = None,
        strict: bool = False,
    ) -> None:
        self.workspace = workspace
        self.store = workspace.store
        self.conn = workspace.conn
        self.kb = kb
        # strict: a document another process wrote since `known` was read is not overwritten
        # (ingest_write.DocumentChanged ends the batch; memories read it again).
        self.writer = DocumentWriter(workspace.store, self.conn, kb, public_id_of, strict=strict)
        self.counts = counts  # added, updated, unchanged, chunks, embedded: after each commit
        self.on_ready = on_ready
        # keep_going: a document that fails to embed or to write (a bug, a hostile file) is
        # left out and recorded in `failures`, the others are written; otherwise it raises.
        self.keep_going = keep_going
        self.failures: list[Failure] = []
        self.interrupt = interrupt
        self.interrupted = False  # `interrupt` said so: `pending` holds what was not written
        self.embedded_any = False  # an interrupt is only taken once something was embedded
        self.write_chunks = max(1, workspace.settings.write_batch_chunks)
        self.window_chunks = min(EMBED_BATCH_CHUNKS, self.write_chunks)
        self.pending: list[PendingDocument] = []
        self.staging: PendingDocument | None = None  # a document being written in parts
        self.refreshes: list[FileRefresh] = []  # files found unchanged, recorded anew
        # Interrupted: the vectors computed for documents left in `pending` (for the caller
        # to carry to the sync that writes them: kbmcp/service/ingest_carry.py).
        self.unwritten_vectors: dict[str, bytes] = {}

    @property
    def not_ready(self) -> int:
        return sum(not document.ready for document in self.pending)

    @property
    def in_progress(self) -> list[PendingDocument]:
        """Documents queued and not ready yet, in order (the one being embedded first, or a
        document being written in parts)."""
        staged = [self.staging] if self.staging is not None else []
        return staged + [document for document in self.pending if not document.ready]

    @property
    def pending_chunks(self) -> int:
        return sum(len(document.spans) for document in self.pending)

    def queue(self, document: PendingDocument) -> None:
        if document.reuse_revision and document.known and document.known.revision_id:
            with self.workspace.lock:
                ids, stored = stored_spans(self.store, self.conn, document.known.revision_id)
            if same_chunks(stored, document.spans):
                # Refreshed in place on the current revision's chunks and vectors.
                document.chunk_ids, document.spans = ids, stored
                document.given_vectors = None
            else:
                # Same content, other chunking (new rules or sizes): a new revision, chunked
                # anew; vectors of chunks whose input is unchanged are reused.
                document.reuse_revision = False
        if self.interrupted:
            self.pending.append(document)
            return
        if len(document.spans) > self.write_chunks and not document.reuse_revision:
            self.staging = document  # (in progress from now on, for progress)
            self._process()  # what came before it first: files are written in order
            if self.interrupted:
                self.staging = None
                self.pending.append(document)
            else:
                self._write_in_parts(document)
            return
        self.pending.append(document)
        if self.pending_chunks >= self.window_chunks:
            self._process()

    def refresh_file(self, path: str, file: RecordedFile | None, content_hash: str | None) -> None:
        """Record the file of the document at `path`, found unchanged (holding `content_hash`),
        with the next commit."""
        if file is not None and content_hash is not None:
            self.refreshes.append(FileRefresh(path, file, content_hash))

    def flush(self) -> None:
        """Embed and commit everything queued (unless interrupted)."""
        self._process()
        self._commit({})  # file refreshes, when no document was left to write

    def should_stop(self, *, progressed: bool = False) -> bool:
        """Whether to stop taking new work: `interrupt` asks for it, and some work was done
        (something embedded, or `progressed`), so a stream of interruptions cannot starve it."""
        worked = self.embedded_any or progressed
        if self.interrupt is not None and not self.interrupted and worked:
            self.interrupted = self.interrupt()
        return self.interrupted

    # ------------------------------------------------------------------ small documents

    def _process(self) -> None:
        """Embed the pending documents in slices, committing the ready ones at least every
        COMMIT_SECONDS, then the rest; stop early (leaving the unready ones pending) when
        interrupted."""
        documents = self.pending
        if not documents or self.interrupted:
            return
        vectors = self._known_vectors(documents)
        # In document order, so files complete one after another (and are committed) as the
        # slices go: sorted by length across the batch, none would be complete until the end.
        missing = list(
            dict.fromkeys(t for d in documents for t in d.embedding_inputs if t not in vectors)
        )
        self._mark_ready(documents, vectors)
        last_commit = time.monotonic()
        for start in range(0, len(missing), EMBED_SLICE):
            if self.should_stop():
                break
            texts = missing[start : start + EMBED_SLICE]
            self._embed_into(vectors, texts, documents)
            self._mark_ready(documents, vectors)
            if time.monotonic() - last_commit >= COMMIT_SECONDS:
                self._commit(vectors)
                last_commit = time.monotonic()
        self._commit(vectors)
        if self.interrupted:
            self.unwritten_vectors.update(
                (text, vectors[text])
                for document in self.pending
                for text in document.embedding_inputs
                if text in vectors
            )

    def _commit(self, vectors: dict[str, bytes]) -> None:
        """Write the ready documents and the file refreshes in one transaction: each document
        whole or not at all. Failed documents are dropped from `pending`."""
        ready = [d for d in self.pending if d.ready and not d.failed]
        self.pending = [d for d in self.pending if not (d.ready or d.failed)]
        if not ready and not self.refreshes:
            return
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            written = Counter[str]()
            try:
                with self.workspace.lock, self.store.write_transaction(self.conn):
                    self.store.ingest.refresh_files(self.conn, self.kb.id, self.refreshes)
                    if ready:  # `kbmcp reembed` may have switched the model meanwhile
                        self._hold_model()
                    for document in ready:
                        if document.failed:  # by its own data, in an attempt rolled back
                            continue
                        outcome = self._write_kept(document, vectors)
                        if outcome is not None:
                            written[outcome[0]] += 1
                            written["chunks"] += outcome[1]
                break
            except self.store.database_errors as error:
                if attempt == CONFLICT_ATTEMPTS or not is_write_conflict(error):
                    raise
        # Counted after the commit: a rolled-back batch reports nothing.
        self.counts.update(written)
        self.refreshes = []

    def _write_kept(self, document: PendingDocument, vectors: dict[str, bytes]) -> Outcome | None:
        """`write`, inside a savepoint when `keep_going`: a document whose write fails leaves
        nothing behind and is recorded as a failure (None); a failure of the database itself
        (disk full, I/O, locked, another model) still ends the batch."""
        if not self.keep_going:
            return self.writer.write(document, vectors)
        try:
            with self.store.savepoint(self.conn):  # inside the batch's transaction
                return self.writer.write(document, vectors)
        except self.store.database_errors:
            raise
        except Exception as error:
            if self.store.is_disk_full(error):  # sqlite-vec's full disk is a plain SQLError
                raise
            if not self.store.in_transaction(self.conn):
                # The database rolled the whole batch back (SQLite does on some errors): the
                # other documents are not written either, so the batch ends here.
                raise
            self._fail(document, error)
            return None

    def _hold_model(self) -> None:
        """Inside a write transaction that writes vectors: they are of the recorded model, and
        stay so until it commits (`kbmcp reembed` may have switched the model while they were
        embedded; on PostgreSQL its switch waits for this transaction)."""
        self.store.vectors.hold_model(self.conn, self.workspace.embedder.fingerprint)

    # ------------------------------------------------------------------ large documents

    def _write_in_parts(self, document: PendingDocument) -> None:
        """Embed and write a document part by part, each part (write_chunks chunks) in its own
        transaction, then switch to it in one more (ingest_write.StagedWrite)."""
        self.staging = document
        try:
            outcome, old_revision_id = self._stage(document)
        except self.store.database_errors:
            raise
        except Exception as error:
            if not self.keep_going or self.store.is_disk_full(error):  # (sqlite-vec's: SQLError)
                raise
            self._fail(document, error)
            return
        finally:
            self.staging = None
        self.counts[outcome[0]] += 1
        self.counts["chunks"] += outcome[1]
        if old_revision_id is not None:
            self._drop_vectors_of(old_revision_id)

    def _stage(self, document: PendingDocument) -> tuple[Outcome, int | None]:
        known = self._known_vectors([document])
        staged = StagedWrite(self.writer, document)
        with self.workspace.lock, self.store.write_transaction(self.conn):
            self._hold_model()
            if not staged.begin():
                return ("unchanged", 0), None
        inputs = document.embedding_inputs
        given = document.given_vectors
        while staged.written < len(document.spans):
            start, end = staged.written, min(staged.written + self.write_chunks, len(inputs))
            if given is not None:
                part = given[start:end]
            else:
                fresh: dict[str, bytes] = {}  # this part's new vectors (`known`: reused ones)
                missing = [t for t in dict.fromkeys(inputs[start:end]) if t not in known]
                for first in range(0, len(missing), EMBED_SLICE):
                    self._embed_into(fresh, missing[first : first + EMBED_SLICE], [])
                    document.embedded = start + sum(
                        t in fresh or t in known for t in inputs[start:end]
                    )
                    if self.on_ready is not None:
                        self.on_ready()
                part = [fresh[text] if text in fresh else known[text] for text in inputs[start:end]]
            with self.workspace.lock, self.store.write_transaction(self.conn):
                self._hold_model()
                staged.write_part(end - start, part)
        with self.workspace.lock, self.store.write_transaction(self.conn):
            self._hold_model()
            outcome = staged.switch()
        document.ready = True
        if self.on_ready is not None:
            self.on_ready()
        return outcome, staged.old_revision_id

    def _drop_vectors_of(self, revision_id: int) -> None:
        """The stored vectors of a revision that is no longer current, write_chunks at a
        time (they were only kept for reuse while it was current)."""
        while True:
            with self.workspace.lock, self.store.write_transaction(self.conn):
                dropped = self.store.ingest.drop_vectors_part(
                    self.conn, revision_id, self.write_chunks
                )
            if dropped == 0:
                return

    def drop_stale_staged(self) -> None:
        """Drop the revisions written in parts that no run came back to within
        STALE_STAGED_SECONDS (a run interrupted for good), write_chunks chunks at a time."""
        before = format_timestamp(now() - timedelta(seconds=STALE_STAGED_SECONDS))
        ingest = self.store.ingest
        with self.workspace.lock:
            stale = ingest.stale_staged(self.conn, self.kb.id, before)
        for revision_id in stale:
            while True:
                with self.workspace.lock, self.store.write_transaction(self.conn):
                    deleted = ingest.delete_chunks_part(self.conn, revision_id, self.write_chunks)
                    if deleted == 0:
                        ingest.delete_revision(self.conn, revision_id)
                if deleted == 0:
                    break

    # ------------------------------------------------------------------ embedding

    def _known_vectors(self, documents: list[PendingDocument]) -> dict[str, bytes]:
        """Vectors keyed by embedding input that need no model: given ones, and reused ones
        from the current revision where a chunk's input is unchanged."""
        vectors: dict[str, bytes] = {}
        with self.workspace.lock:
            for document in documents:
                if document.known and document.known.revision_id is not None:
                    vectors.update(self._previous_vectors(document.known))
        for document in documents:
            vectors.update(document.carried_vectors)  # (computed by a sync that deferred it)
            if document.given_vectors is not None:
                vectors.update(zip(document.embedding_inputs, document.given_vectors, strict=True))
        return vectors

    def _previous_vectors(self, known: KnownDocument) -> dict[str, bytes]:
        assert known.revision_id is not None
        rows = self.store.catalog.chunks_with_vectors(self.conn, known.revision_id)
        return {
            chunk_embedding_input(
                known.title, json.loads(row.heading_path), row.text
            ): row.embedding
            for row in rows
        }

    def _embed_into(
        self, vectors: dict[str, bytes], texts: list[str], documents: list[PendingDocument]
    ) -> None:
        embedded = self._embed(texts, documents)
        vectors.update((t, v) for t, v in zip(texts, embedded, strict=True) if v is not None)
        self.counts["embedded"] += sum(v is not None for v in embedded)
        self.embedded_any = True

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
            if not self.keep_going or not documents:
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

    def _mark_ready(self, documents: list[PendingDocument], vectors: dict[str, bytes]) -> None:
        """Count each document's chunks that have vectors; a document with all of them (or
        failed) is ready. Tells `on_ready` (progress)."""
        for document in documents:
            if document.ready:
                continue
            inputs = document.embedding_inputs
            document.embedded = sum(text in vectors for text in inputs)
            if document.failed or document.embedded == len(inputs):
                document.ready = True  # (a failed one is done, for progress: not written)
        if self.on_ready is not None:
            self.on_ready()

    def _fail(self, document: PendingDocument, error: Exception) -> None:
        document.failed = True
        self.failures.append(Failure(document.path, document.source, error))


def is_write_conflict(error: BaseException) -> bool:
    """A transaction the database cancelled for its conflict with another (CONFLICT_SQLSTATES):
    running it again can succeed."""
    return getattr(error, "sqlstate", None) in CONFLICT_SQLSTATES
