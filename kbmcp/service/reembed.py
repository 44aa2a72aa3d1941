"""`kbmcp reembed`: every current chunk embedded again with the configured model, which becomes
the database's model.

Vectors are computed first, outside any transaction and without the workspace lock (the rule in
docs/architecture.md), and staged in a temporary table of this connection (not part of the
database: filling it takes no write lock), a batch at a time. The chunks are read a page at a
time (REEMBED_PAGE, by id), so memory stays flat at any size (reading every chunk's text at
once made it grow with the database). The switch (record the model, drop the old vectors and
index, copy the staged ones in) is then one transaction of set-based statements, so searches
see either the old model's vectors or the new one's, never a mix, and the write lock is held
for the copy alone (docs/ingest.md gives its duration). On PostgreSQL the HNSW index is then
built once over the new vectors.

Chunks that another writer adds or retitles meanwhile are found by the store
(kbmcp/store/reembed.py `late_chunks`: SQLite reads its index change log, PostgreSQL compares
the staged vectors with the current chunks), embedded outside the transaction, and the switch
is tried again when more arrive while it waits: at most REEMBED_ROUNDS checks for late chunks
in all, so a folder that never stops changing ends with an error instead of a loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from kbmcp.access import ADMIN, Principal
from kbmcp.embed.base import Embedder
from kbmcp.errors import StoreError
from kbmcp.store.reembed import ChunkInput, StagedVector, input_hash
from kbmcp.store.vectors import to_blob
from kbmcp.workspace import Workspace

REEMBED_BATCH = 256
REEMBED_PAGE = 4096  # chunks read at a time (~6 MB of text at 1,500 characters a chunk)
REEMBED_ROUNDS = 5


def reembed(
    workspace: Workspace,
    principal: Principal,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Re-embed every current chunk with the configured model and record it as the database's
    model (see the module docstring). Needs the administrator scope."""
    principal.require(ADMIN)
    started = time.perf_counter()
    store, conn = workspace.store, workspace.conn
    embedder = workspace.embedder
    with workspace.lock:
        marker, total = store.reembed.start(conn)
    try:
        _stage_current_chunks(workspace, embedder, total, progress)
        rounds = iter(range(REEMBED_ROUNDS))
        for _round in rounds:
            marker = _catch_up(workspace, embedder, marker, rounds)
            with workspace.lock, store.write_transaction(conn):
                previous = store.vectors.recorded_model(conn)
                chunks = store.reembed.switch(conn, embedder.fingerprint, marker)
            if chunks is not None:
                break
        else:
            raise StoreError(
                f"documents kept changing while re-embedding ({REEMBED_ROUNDS} tries): "
                "run `kbmcp reembed` again when ingest is quieter",
                details={"rounds": REEMBED_ROUNDS},
            )
        with workspace.lock, store.write_transaction(conn):
            store.reembed.finish(conn)
    finally:
        with workspace.lock:
            store.reembed.drop_staging(conn)
    return {
        "previous_model": None if previous is None else previous.__dict__,
        "model": embedder.fingerprint.__dict__,
        "chunks": chunks,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _stage_current_chunks(
    workspace: Workspace,
    embedder: Embedder,
    total: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    """Embed every current chunk into the staging table, a page at a time. Chunks that change
    after the marker are checked again by `_catch_up`, so pages need not be one snapshot."""
    after, done = 0, 0
    while True:
        with workspace.lock:
            page = workspace.store.reembed.current_chunks(workspace.conn, after, REEMBED_PAGE)
        if not page:
            return
        done = _stage(workspace, embedder, page, progress, done, max(total, done + len(page)))
        after = page[-1].chunk_id


def _catch_up(workspace: Workspace, embedder: Embedder, marker: int, rounds: Iterator[int]) -> int:
    """Embed the current chunks changed after `marker` whose staged vector is missing or was
    computed from another input (a new revision, a new title), until none is left or the
    rounds run out (each check after the first takes one from `rounds`). Returns the marker
    the last check covers."""
    while True:
        with workspace.lock:
            now, late = workspace.store.reembed.late_chunks(workspace.conn, marker)
        if now == marker and not late:
            return marker
        _stage(workspace, embedder, late, None)
        marker = now
        if next(rounds, None) is None:
            return marker  # still changing: the switch refuses and reembed reports it


def _stage(
    workspace: Workspace,
    embedder: Embedder,
    rows: list[ChunkInput],
    progress: Callable[[int, int], None] | None,
    done: int = 0,
    total: int | None = None,
) -> int:
    """Embed chunks in batches into the staging table; `progress(done, total)` after each
    batch, counting from `done`. Returns the chunks done."""
    total = len(rows) if total is None else total
    for start in range(0, len(rows), REEMBED_BATCH):
        batch = rows[start : start + REEMBED_BATCH]
        inputs = [row.embedding_input for row in batch]
        embedded = embedder.embed(inputs)
        staged = [
            StagedVector(row.chunk_id, row.title, input_hash(text), to_blob(vector))
            for row, text, vector in zip(batch, inputs, embedded, strict=True)
        ]
        with workspace.lock:
            workspace.store.reembed.stage_vectors(workspace.conn, staged)
        if progress:
            progress(done + min(start + REEMBED_BATCH, len(rows)), total)
    return done + len(rows)
