"""The vectors concern of the store contract: the embedding-model record and the vector tables.

Implemented by kbmcp/store/sqlite/vectors.py (a `chunk_vector` table and a sqlite-vec vec0
index) and kbmcp/store/postgres/vectors.py (pgvector columns and an HNSW index). Both exchange
a vector as the same bytes: little-endian float32 (`to_blob`), so a vector copied between the
backends is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from kbmcp.embed.base import ModelFingerprint
from kbmcp.errors import ModelMismatch

if TYPE_CHECKING:
    import numpy as np

    from kbmcp.store.connection import Connection


def model_matches(
    recorded: ModelFingerprint | None, fingerprint: ModelFingerprint, *, database: str
) -> bool:
    """Both backends' `check_model` once the recorded model is read: False when none is
    recorded, True when it is `fingerprint`, otherwise ModelMismatch naming `kbmcp reembed`.
    `database`: how the message names the database ("file", "database")."""
    if recorded is None:
        return False
    if recorded != fingerprint:
        raise ModelMismatch(
            f"this {database} was built with the embedding model {recorded.describe()}, but the "
            f"configured model is {fingerprint.describe()}; run `kbmcp reembed` to re-embed "
            "every document with the configured model, or configure the recorded model "
            "(KBMCP_EMBEDDER)",
            details={"recorded": recorded.__dict__, "configured": fingerprint.__dict__},
        )
    return True


class Vectors(Protocol):
    def recorded_model(self, conn: Connection) -> ModelFingerprint | None:
        """The model the database's vectors come from; None before the first one is recorded."""
        ...

    def check_model(self, conn: Connection, fingerprint: ModelFingerprint) -> bool:
        """True if the vectors come from `fingerprint`, False if no model is recorded yet;
        ModelMismatch (naming `kbmcp reembed`) if they come from another model."""
        ...

    def hold_model(self, conn: Connection, fingerprint: ModelFingerprint) -> None:
        """Inside a write transaction that writes vectors of `fingerprint`: `check_model`, and
        the model stays recorded until the transaction ends. SQLite's write transaction already
        excludes every other writer; PostgreSQL locks the record (FOR SHARE), so a re-embed's
        switch (`record_model`) waits for this transaction, and one that starts after the
        switch sees the new model (ModelMismatch)."""
        ...

    def record_model(self, conn: Connection, fingerprint: ModelFingerprint) -> None:
        """Record `fingerprint` and empty the vector tables for it (inside a write
        transaction): vectors of another model are dropped."""
        ...

    # Two tables hold vectors, keyed by chunk id: the stored vectors of every chunk of each
    # document's current revision (published or archived: a new revision reuses the vectors of
    # unchanged chunk texts, an archived document comes back without embedding), and the
    # indexed vectors of published documents' current chunks. `rows`: (chunk id, vector).

    def store_vectors(self, conn: Connection, rows: Sequence[tuple[int, bytes]]) -> None:
        """Keep each chunk's vector (chunk id, `to_blob` bytes), replacing one it had: every
        chunk of a document's current revision has one, published or archived."""
        ...

    def drop_stored_vectors(self, conn: Connection, chunk_ids: Iterable[int]) -> None: ...

    def index_vectors(
        self, conn: Connection, knowledge_base_id: int, rows: Sequence[tuple[int, bytes]]
    ) -> None:
        """Put chunks of the knowledge base into the vector index (PostgreSQL keeps the
        knowledge base with each vector, for approximate searches over a readable set)."""
        ...

    def unindex_vectors(self, conn: Connection, chunk_ids: Iterable[int]) -> None: ...


# numpy is imported where vectors are converted, not with the module: commands that only read
# the model record (`kbmcp ls` opening a file) never load it.


def to_blob(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype=np.float32)
