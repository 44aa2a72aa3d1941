"""The reembed concern of the store contract: what `kbmcp reembed` (kbmcp/service/reembed.py)
needs to switch every vector to another model without a long write transaction.

The service embeds every current chunk outside any transaction and stages the vectors in this
connection's own temporary table (filling it takes no write lock, and memory stays flat); then
one write transaction switches: the new model is recorded and the staged vectors of the chunks
still current are copied into the vector tables by set-based statements, so searches see the
old model's vectors or the new one's, never a mix.

Chunks another writer adds or retitles while the vectors are computed are found by
`late_chunks`, from a marker each backend defines:
- SQLite: the position in `index_log`, the change log its triggers append to: only the
  documents logged after it are checked, their staged inputs compared by hash;
- PostgreSQL (no change log: a server keeps no caches to feed): the staging table keeps the
  title each vector was computed with (a chunk's heading and text never change), and the
  current chunks with no staged vector or another title are late; the marker stays 0.
`switch` refuses (None) when chunks came late after all: the service embeds them and tries
again.

Implemented by kbmcp/store/sqlite/reembed.py and kbmcp/store/postgres/reembed.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kbmcp.embed.inputs import chunk_embedding_input

if TYPE_CHECKING:
    from kbmcp.embed.base import ModelFingerprint
    from kbmcp.store.connection import Connection


@dataclass(frozen=True)
class ChunkInput:
    """A current chunk with what its vector is computed from."""

    chunk_id: int
    title: str  # its document's
    heading_path: str  # JSON, as stored
    text: str

    @property
    def embedding_input(self) -> str:
        return chunk_embedding_input(self.title, json.loads(self.heading_path), self.text)


@dataclass(frozen=True)
class StagedVector:
    chunk_id: int
    title: str  # the document title the vector was computed with
    input_hash: str  # input_hash() of its embedding input
    embedding: bytes  # `to_blob` bytes


def input_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Reembed(Protocol):
    def start(self, conn: Connection) -> tuple[int, int]:
        """An empty staging table for this connection, the change marker, and how many chunks
        the documents' current revisions hold (`current_chunks` reads them)."""
        ...

    def current_chunks(self, conn: Connection, after: int, limit: int) -> list[ChunkInput]:
        """At most `limit` chunks of the documents' current revisions with an id above `after`,
        ordered by id: one page (the service never holds every chunk's text at once)."""
        ...

    def stage_vectors(self, conn: Connection, rows: Sequence[StagedVector]) -> None:
        """Keep these vectors in the staging table (a chunk staged again is replaced)."""
        ...

    def late_chunks(self, conn: Connection, marker: int) -> tuple[int, list[ChunkInput]]:
        """The current chunks changed since `marker` whose staged vector is missing or was
        computed from another input, and the marker this check covers."""
        ...

    def switch(self, conn: Connection, fingerprint: ModelFingerprint, marker: int) -> int | None:
        """Inside a write transaction: record `fingerprint` as the model and put the staged
        vectors of the current chunks in the vector tables (the indexed ones for published
        documents); the number of current chunks. None, with nothing changed, when chunks
        changed since `marker` (late_chunks has work again)."""
        ...

    def finish(self, conn: Connection) -> None:
        """After the switch: what the backend builds once over the new vectors (PostgreSQL:
        the HNSW index, in a transaction of its own; searches use exact scans until it
        exists). SQLite: nothing."""
        ...

    def drop_staging(self, conn: Connection) -> None:
        """Drop the staging table (also after a failure; nothing if the connection is gone)."""
        ...
