"""The index concern of the store contract: putting a revision's chunks into the search indexes
(keyword and vector) and taking them out.

Implemented by kbmcp/store/sqlite/index.py (FTS5 and the sqlite-vec vec0 table) and
kbmcp/store/postgres/index.py (the keyword postings of kbmcp/store/postgres/keyword.py and the
pgvector table). The indexed rows are the same on both: the chunks of the current revision of
a published document, each with its document's title, its heading path joined with " > "
(`heading_text`) and its text, and its stored vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection


@dataclass(frozen=True)
class IndexRow:
    """One chunk to index: its row id, heading path, text and vector (little-endian float32,
    kbmcp/store/vectors.py)."""

    chunk_id: int
    heading_path: Sequence[str]
    text: str
    embedding: bytes


def heading_text(heading_path: Sequence[str]) -> str:
    """The heading column of the keyword index: the headings joined with " > "."""
    return " > ".join(heading_path)


class Index(Protocol):
    def add_to_index(
        self, conn: Connection, knowledge_base_id: int, title: str, rows: Sequence[IndexRow]
    ) -> None:
        """Index chunks of one document of the knowledge base (inside the caller's
        transaction): keyword rows from `title` and each row's heading path and text, and the
        row's vector."""
        ...

    def remove_from_index(self, conn: Connection, chunk_ids: Sequence[int]) -> None:
        """Take chunks out of both indexes (their rows and stored vectors stay)."""
        ...

    def chunk_ids_of_revision(self, conn: Connection, revision_id: int) -> list[int]: ...

    def index_rows_of_revision(self, conn: Connection, revision_id: int) -> list[IndexRow]:
        """The chunks of a revision that have a stored vector, as index rows, by ordinal."""
        ...

    def index_revision(self, conn: Connection, revision_id: int, title: str) -> None:
        """Put every chunk of a revision into the indexes with its stored vector, without
        passing the vectors through Python (a huge document's switch, kbmcp/service/
        ingest_write.py `StagedWrite`)."""
        ...

    def unindex_revision(self, conn: Connection, revision_id: int) -> None:
        """Take every chunk of a revision out of the indexes."""
        ...
