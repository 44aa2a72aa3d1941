"""What a sync that made way for a newer change had already done for the files it deferred.

A watch's sync stops early when an edit jumps the queue (kbmcp/service/watch.py): it commits
the documents that are ready and defers the rest, to be synced after the edit. Those deferred
documents were already read, extracted (a large PDF: over a minute on a loaded machine) and
partly embedded; without a carry, the later sync read them again from scratch. A `Carry` keeps,
per deferred file, its extracted text and the vectors already computed, and the later sync
takes them instead of doing that work again.

A carried extraction is used only for the same bytes read the same way: the file is read again
(cheap) and its hash must be the one the extraction was made from, under the same read key
(kind, extraction and parsing versions, tags, metadata, chunking). Vectors are keyed by their
embedding input, so they fit whatever the document's chunks turn out to be. An entry is taken
once; one whose file changed is dropped when its file is next synced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbmcp.ingest.reader import Extracted, FileBytes
from kbmcp.service.ingest_write import PendingDocument


@dataclass(frozen=True)
class CarriedFile:
    bytes_hash: str  # of the bytes `extracted` was made from
    read_key: str  # how they were read (kbmcp.service.ingest.read_key)
    extracted: Extracted
    vectors: dict[str, bytes]  # embedding input -> vector, those computed before the deferral


@dataclass
class Carry:
    files: dict[str, CarriedFile] = field(default_factory=dict)  # by source path

    def take(self, source: str, file: FileBytes, read_key: str) -> CarriedFile | None:
        """The carried work for the file at `source`, when these are the bytes it was done
        for; the entry is gone either way."""
        carried = self.files.pop(source, None)
        if carried is None or file.data is None:
            return None
        if carried.bytes_hash != file.sha256 or carried.read_key != read_key:
            return None  # the file changed since (or is read another way): start over
        return carried

    def keep(self, documents: list[PendingDocument], vectors: dict[str, bytes]) -> None:
        """Keep the work done for `documents`, deferred unwritten; `vectors`: those computed
        for them so far."""
        for document in documents:
            if document.source is None or document.file is None or document.extracted is None:
                continue
            self.files[document.source] = CarriedFile(
                document.file.bytes_hash,
                document.file.read_key,
                document.extracted,
                {text: vectors[text] for text in document.embedding_inputs if text in vectors},
            )
