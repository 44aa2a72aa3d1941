"""Writing one document: inside a batch's write transaction (`DocumentWriter.write`), or, for a
document with more chunks than one write transaction may hold, in parts (`StagedWrite`).

A document in parts gets a new revision whose chunks and vectors are written over several short
transactions while the document keeps its current revision (or, when new, stays archived without
one), so searches go on seeing the old text; the last transaction moves the search indexes from
the old revision's chunks to the new one's in set-based statements and makes the revision
current: the document changes for readers at once. A run that is interrupted leaves the revision
listed in `staged_revision`; the next run with the same content and chunking resumes it from its
last written chunk (kbmcp/store/ingest.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbmcp.clock import now_iso
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.ids import IdKey
from kbmcp.ingest.chunker import ChunkSpan
from kbmcp.ingest.parsing import ParsedDocument
from kbmcp.store.catalog import (
    CurrentDocument,
    DocumentAttributes,
    KnowledgeBaseRef,
    NewChunk,
    NewDocument,
    NewRevision,
    dump_json,
)
from kbmcp.store.index import IndexRow
from kbmcp.store.ingest import RecordedFile

if TYPE_CHECKING:
    from kbmcp.ingest.reader import Extracted
    from kbmcp.store.backend import Connection, Store


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
    `chunking`: the chunking signature `spans` were cut with (JSON), recorded for a revision
    written in parts.
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
    chunking: str = ""
    ready: bool = False  # its vectors are computed (progress counts it as done)
    embedded: int = 0  # how many of its chunks have their vectors so far (for progress)
    failed: bool = False  # it could not be embedded or written (IngestBatch.keep_going)
    file: RecordedFile | None = None  # the file it was read from (None: given as text)
    # What the file's bytes were extracted to, and vectors computed for it by an earlier sync
    # that deferred it (kbmcp/service/ingest_carry.py): a deferred document is not redone.
    extracted: Extracted | None = None
    carried_vectors: dict[str, bytes] = field(default_factory=dict)

    @functools.cached_property
    def embedding_inputs(self) -> list[str]:
        return [
            chunk_embedding_input(self.parsed.title, span.heading_path, span.text)
            for span in self.spans
        ]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DocumentChanged(Exception):
    """A document written by a `strict` writer is not as its caller read it
    (`PendingDocument.known`): another process wrote it in between. Nothing of it is written
    (the write transaction rolls back); the caller reads it again and decides anew."""


# What `write` and `StagedWrite.switch` report: 'added', 'updated' or 'unchanged', and the number
# of chunks put into the indexes.
Outcome = tuple[str, int]


class DocumentWriter:
    """Writes documents of one knowledge base through one connection, inside transactions its
    caller holds."""

    def __init__(
        self,
        store: Store,
        conn: Connection,
        kb: KnowledgeBaseRef,
        public_id_of: Callable[[str], str] | None = None,
        *,
        strict: bool = False,
    ) -> None:
        self.store = store
        self.conn = conn
        self.kb = kb
        # strict: what to write was decided from `document.known` (memories merge their tags
        # with the stored ones): a document found otherwise is DocumentChanged, not overwritten.
        self.strict = strict
        # The public id a new document gets from its path: doc_... from the knowledge base and
        # the path by default (kbmcp/ids.py); memories pass their own rule.
        self.public_id_of = public_id_of or (
            lambda path: self.ids.make("document", kb.public_id, path)
        )

    @functools.cached_property
    def ids(self) -> IdKey:
        """The database's id key (it never changes), read at the first write."""
        return self.store.id_key.id_key_of(self.conn)

    def current(self, document: PendingDocument) -> CurrentDocument | None:
        """The document as it is now (re-read inside the write transaction: another process may
        have written this path since the run started; PostgreSQL locks its row until the
        transaction ends)."""
        return self.store.catalog.current_document(self.conn, self.kb.id, document.path)

    def check_known(self, document: PendingDocument, current: CurrentDocument | None) -> None:
        """A strict writer's check of the document found in its write transaction: it must be
        the one `document.known` describes (None: none), else DocumentChanged."""
        if self.strict and not _as_known(current, document.known):
            raise DocumentChanged(document.path)

    def write(self, document: PendingDocument, vectors: dict[str, bytes]) -> Outcome:
        """Write one document inside the caller's transaction."""
        conn = self.conn
        now = now_iso()
        current = self.current(document)
        self.check_known(document, current)
        while current is None:
            inserted = self.insert_document(document, now)
            if inserted is not None:
                document_id, document_public_id = inserted
                revision_id = self._insert_revision(document, document_id, document_public_id, now)
                self._index_chunks(document, vectors)
                self.update_document(document, document_id, revision_id, now)
                return "added", len(document.spans)
            # Another writer added this path meanwhile (two servers on one PostgreSQL database):
            # it is an existing document now (the UNIQUE (knowledge_base_id, path) constraint
            # decided which insert won; a strict writer stops here).
            current = self.current(document)
            self.check_known(document, current)
        if (current.status, current.content_hash, current.attributes_hash, current.source) == (
            "published",
            document.content_hash,
            document.attributes_hash,
            document.source,
        ):
            self.store.ingest.record_file(conn, current.id, document.file)
            return "unchanged", 0  # another process wrote exactly this since the run started
        known = document.known
        current_revision_id = current.current_revision_id
        if (
            document.reuse_revision
            and known is not None
            and current_revision_id == known.revision_id
            and current_revision_id is not None
        ):
            reindexed = self._refresh(document, vectors, current.status)
            self.update_document(document, current.id, current_revision_id, now)
            return "updated", len(document.spans) if reindexed else 0
        if current_revision_id is not None:
            old_chunk_ids = self.store.index.chunk_ids_of_revision(conn, current_revision_id)
            if current.status == "published":
                self.store.index.remove_from_index(conn, old_chunk_ids)
            self.store.vectors.drop_stored_vectors(conn, old_chunk_ids)
        revision_id = self._insert_revision(document, current.id, current.public_id, now)
        self._index_chunks(document, vectors)
        self.update_document(document, current.id, revision_id, now)
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
                self.store.index.remove_from_index(self.conn, document.chunk_ids)
            self._store_and_index(document, rows)
        return reindex

    def insert_document(
        self, document: PendingDocument, now: str, *, staged: bool = False
    ) -> tuple[int, str] | None:
        """A new document row (`staged`: archived until its revision written in parts is
        switched in): its row id and public id; None when another writer added the path
        meanwhile (see `catalog.insert_document`)."""
        public_id = self._free_public_id(document.path)
        new = NewDocument(
            public_id=public_id,
            knowledge_base_id=self.kb.id,
            path=document.path,
            title=document.parsed.title,
            kind=document.parsed.kind,
            source=document.source,
            metadata=dump_json(document.metadata),
        )
        if staged:
            document_id = self.store.ingest.insert_staged_document(self.conn, new, now)
        else:
            document_id = self.store.catalog.insert_document(self.conn, new, now)
        return None if document_id is None else (document_id, public_id)

    def _free_public_id(self, path: str) -> str:
        """The public id of a new document at `path`. Ids come from the path, and a document
        keeps its id when it moves (the add-order rule, kbmcp/service/ingest_places.py), so the
        id of a path may be held by the document that lived there: then the next of a series
        derived from the path is taken."""
        public_id = self.public_id_of(path)
        attempt = 1
        while self.store.catalog.document_id_taken(self.conn, public_id):
            attempt += 1
            public_id = self.ids.make("document", self.kb.public_id, path, attempt)
        return public_id

    def insert_revision_row(
        self, document: PendingDocument, document_id: int, document_public_id: str, now: str
    ) -> tuple[int, str]:
        """A new immutable revision (without chunks): its row id and public id. (Its number is
        the document's next: PostgreSQL holds the document's row, locked by `current`.)"""
        catalog = self.store.catalog
        number = catalog.next_revision_number(self.conn, document_id)
        revision_public_id = self.ids.make("revision", document_public_id, number)
        revision = NewRevision(
            public_id=revision_public_id,
            document_id=document_id,
            number=number,
            content=document.content,
            content_hash=document.content_hash,
            char_count=len(document.content),
            line_count=line_count(document.content),
        )
        return catalog.insert_revision(self.conn, revision, now), revision_public_id

    def insert_chunks(
        self, revision_id: int, revision_public_id: str, spans: list[ChunkSpan]
    ) -> list[int]:
        """The chunk rows of `spans` in a revision; returns their ids."""
        chunks = [
            NewChunk(
                public_id=self.ids.make("chunk", revision_public_id, span.ordinal),
                ordinal=span.ordinal,
                heading_path=dump_json(list(span.heading_path)),
                char_start=span.char_start,
                char_end=span.char_end,
                line_start=span.line_start,
                line_end=span.line_end,
                text=span.text,
            )
            for span in spans
        ]
        return self.store.catalog.insert_chunks(self.conn, revision_id, chunks)

    def _insert_revision(
        self, document: PendingDocument, document_id: int, document_public_id: str, now: str
    ) -> int:
        """A new immutable revision and its chunks; sets `document.chunk_ids`."""
        revision_id, revision_public_id = self.insert_revision_row(
            document, document_id, document_public_id, now
        )
        document.chunk_ids = self.insert_chunks(revision_id, revision_public_id, document.spans)
        return revision_id

    def _index_chunks(self, document: PendingDocument, vectors: dict[str, bytes]) -> None:
        self._store_and_index(document, self._index_rows(document, vectors))

    def _store_and_index(self, document: PendingDocument, rows: list[IndexRow]) -> None:
        self.store.vectors.store_vectors(self.conn, [(row.chunk_id, row.embedding) for row in rows])
        self.store.index.add_to_index(self.conn, self.kb.id, document.parsed.title, rows)

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

    def update_document(
        self, document: PendingDocument, document_id: int, revision_id: int, now: str
    ) -> None:
        """Attributes, current revision, published status, tags and the file it came from."""
        attributes = DocumentAttributes(
            title=document.parsed.title,
            kind=document.parsed.kind,
            source=document.source,
            metadata=dump_json(document.metadata),
            revision_id=revision_id,
            attributes_hash=document.attributes_hash,
        )
        self.store.catalog.update_document(self.conn, document_id, attributes, now)
        self.store.catalog.replace_tags(self.conn, document_id, document.tags)
        self.store.ingest.record_file(self.conn, document_id, document.file)


class StagedWrite:
    """A document written in parts: `begin`, then `write_part` for each part of its chunks, then
    `switch`, each inside its own short transaction that the caller holds."""

    def __init__(self, writer: DocumentWriter, document: PendingDocument) -> None:
        self.writer = writer
        self.store = writer.store
        self.conn = writer.conn
        self.document = document
        self.revision_id = 0
        self.revision_public_id = ""
        self.document_id = 0
        self.written = 0  # chunks of `document.spans` already written (with their vectors)
        self.old_revision_id: int | None = None  # the revision it replaces, once switched

    def begin(self) -> bool:
        """Find or start the staged revision (resuming one with the same content and chunking
        from its last written chunk). False when there is nothing to write: another process
        wrote exactly this document meanwhile."""
        writer, document = self.writer, self.document
        now = now_iso()
        current = writer.current(document)
        writer.check_known(document, current)
        while current is None:
            inserted = writer.insert_document(document, now, staged=True)
            if inserted is not None:
                self.document_id, document_public_id = inserted
                break
            current = writer.current(document)  # another writer added this path meanwhile
            writer.check_known(document, current)
        if current is not None:
            self.document_id, document_public_id = current.id, current.public_id
            if (current.status, current.content_hash, current.attributes_hash, current.source) == (
                "published",
                document.content_hash,
                document.attributes_hash,
                document.source,
            ):
                self.store.ingest.record_file(self.conn, self.document_id, document.file)
                return False
            if self._resume():
                return True
        self.revision_id, self.revision_public_id = writer.insert_revision_row(
            document, self.document_id, document_public_id, now
        )
        self.store.ingest.add_staged(
            self.conn, self.revision_id, self.document_id, document.chunking, now
        )
        return True

    def _resume(self) -> bool:
        """Take up a staged revision of this document with the same content and chunking whose
        written chunks are the first of `spans`, each with its vector."""
        ingest, document = self.store.ingest, self.document
        shapes = [
            (s.ordinal, s.char_start, s.char_end, dump_json(list(s.heading_path)))
            for s in document.spans
        ]
        for staged in ingest.staged_revisions(self.conn, self.document_id):
            if (staged.content_hash, staged.chunking) != (document.content_hash, document.chunking):
                continue
            written = ingest.staged_chunks(self.conn, staged.revision_id)
            stored = [(c.ordinal, c.char_start, c.char_end, c.heading_path) for c in written]
            if stored == shapes[: len(written)] and all(c.has_vector for c in written):
                self.revision_id, self.revision_public_id = staged.revision_id, staged.public_id
                self.written = len(written)
                return True
        return False

    def write_part(self, count: int, vectors: list[bytes]) -> None:
        """The next `count` chunks and their vectors (one per chunk, in order)."""
        spans = self.document.spans[self.written : self.written + count]
        chunk_ids = self.writer.insert_chunks(self.revision_id, self.revision_public_id, spans)
        self.store.vectors.store_vectors(self.conn, list(zip(chunk_ids, vectors, strict=True)))
        self.store.ingest.touch_staged(self.conn, self.revision_id, now_iso())
        self.written += len(spans)

    def switch(self) -> Outcome:
        """Make the written revision current: out of the indexes with the old revision's chunks,
        in with the new one's, the document updated and published."""
        document = self.document
        chunks, with_vectors = self.store.ingest.chunks_and_vectors(self.conn, self.revision_id)
        if not chunks == with_vectors == len(document.spans):
            # Only a `kbmcp reembed` in between drops stored vectors (and it records a new
            # model, which the caller checks first); anything else is a bug.
            raise RuntimeError(
                f"{document.path}: the revision written in parts has {chunks} chunks and "
                f"{with_vectors} vectors, expected {len(document.spans)}"
            )
        current = self.writer.current(document)
        assert current is not None
        current_revision_id = current.current_revision_id
        if current_revision_id is not None and current.status == "published":
            self.store.index.unindex_revision(self.conn, current_revision_id)
        self.store.index.index_revision(self.conn, self.revision_id, document.parsed.title)
        self.writer.update_document(document, self.document_id, self.revision_id, now_iso())
        self.store.ingest.remove_staged(self.conn, self.revision_id)
        self.old_revision_id = current_revision_id
        return ("added" if current_revision_id is None else "updated"), len(document.spans)


def _as_known(current: CurrentDocument | None, known: KnownDocument | None) -> bool:
    """Whether the document found in the write transaction is the one its writer read."""
    if current is None or known is None:
        return current is None and known is None
    return (
        current.status,
        current.source,
        current.attributes_hash,
        current.current_revision_id,
    ) == (
        known.status,
        known.source,
        known.attributes_hash,
        known.revision_id,
    )


def same_chunks(stored: list[ChunkSpan], fresh: list[ChunkSpan]) -> bool:
    def shape(spans: list[ChunkSpan]) -> list[tuple]:
        return [(s.char_start, s.char_end, tuple(s.heading_path)) for s in spans]

    return shape(stored) == shape(fresh)


def stored_spans(
    store: Store, conn: Connection, revision_id: int
) -> tuple[list[int], list[ChunkSpan]]:
    """The chunks of a stored revision as (chunk ids, spans), in order."""
    ids, spans = [], []
    for chunk in store.catalog.stored_chunks(conn, revision_id):
        ids.append(chunk.id)
        spans.append(
            ChunkSpan(
                chunk.ordinal, tuple(json.loads(chunk.heading_path)), chunk.char_start,
                chunk.char_end, chunk.line_start, chunk.line_end, chunk.text,
            )
        )  # fmt: skip
    return ids, spans


def line_count(text: str) -> int:
    """Lines as the chunker numbers them: a break is \\r\\n, \\r or \\n."""
    if not text:
        return 0
    breaks = text.count("\n") + text.count("\r") - text.count("\r\n")
    return breaks + (0 if text.endswith(("\n", "\r")) else 1)
