"""Maintenance: `kbmcp doctor` (what is this file, is the model usable) and `kbmcp reembed`."""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import apsw

from kbmcp import __version__
from kbmcp.access import ADMIN, Principal
from kbmcp.embed.base import Embedder
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import StoreError
from kbmcp.ids import TEST_KEY_ENV
from kbmcp.store.connection import write_transaction
from kbmcp.store.files import loose_permissions
from kbmcp.store.id_key import id_key_info
from kbmcp.store.migrations import current_version, latest_version
from kbmcp.store.vectors import (
    index_vectors,
    record_model,
    recorded_model,
    store_vectors,
    to_blob,
)
from kbmcp.workspace import Workspace

# Documents and memories share tables (migration 6): each count names its kind.
OF_KIND = """
SELECT count(*) FROM document AS d JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id
WHERE kb.kind = '{kind}' AND d.status = '{status}'
"""
COUNTS = {
    "knowledge_bases": "SELECT count(*) FROM knowledge_base WHERE kind = 'documents'",
    "documents": OF_KIND.format(kind="documents", status="published"),
    "archived_documents": OF_KIND.format(kind="documents", status="archived"),
    "memory_stores": "SELECT count(*) FROM knowledge_base WHERE kind = 'memories'",
    "memories": OF_KIND.format(kind="memories", status="published"),
    "forgotten_memories": OF_KIND.format(kind="memories", status="archived"),
    "revisions": "SELECT count(*) FROM revision",
    "indexed_chunks": "SELECT count(*) FROM indexed_chunk",
}

# Every chunk of every document's current revision, with what its vector is computed from.
SELECT_CURRENT_CHUNKS = """
SELECT c.id, d.title, c.heading_path, c.text, d.status = 'published' AS indexed
FROM document AS d JOIN chunk AS c ON c.revision_id = d.current_revision_id
ORDER BY c.id
"""

REEMBED_BATCH = 256
REEMBED_ROUNDS = 5


def doctor(workspace: Workspace, principal: Principal) -> dict[str, Any]:
    """A report on versions, the file, the model and counts; never raises for a model problem.
    It describes the whole file, so it needs the administrator scope."""
    principal.require(ADMIN)
    report = _file_report(workspace)
    report["model"] = _model_status(workspace)  # loads the model: not while holding the lock
    return report


def _file_report(workspace: Workspace) -> dict[str, Any]:
    conn = workspace.conn
    recorded = recorded_model(conn)
    return {
        "kbmcp": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "sqlite_vec": _package_version("sqlite-vec"),
        "mcp": _package_version("mcp"),
        "db_path": str(workspace.settings.db_path),
        "schema_version": current_version(conn),
        "schema_latest": latest_version(),
        "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
        "recorded_model": None if recorded is None else recorded.__dict__,
        "configured_embedder": workspace.settings.embedder,
        "counts": {name: conn.execute(query).fetchone()[0] for name, query in COUNTS.items()},
        "id_key": _id_key_report(conn),
        # Files others may read (kbmcp/store/files.py): kbmcp creates them 0600.
        "warnings": loose_permissions(Path(workspace.settings.db_path)),
    }


def _id_key_report(conn: apsw.Connection) -> dict[str, Any] | None:
    """How the file's ids are keyed (docs/security.md, threat model), with a note when they are
    guessable: a key pinned for tests, or ids made before the file had a key."""
    info = id_key_info(conn)
    if info is None:
        return None
    notes = []
    if info.origin == "pinned":
        notes.append(
            f"the key was pinned by {TEST_KEY_ENV} when the file was created: anyone who knows "
            "it can compute ids; use such files for tests only"
        )
    if info.unkeyed_before:
        notes.append(
            f"ids made before {info.created_at} (when the file was upgraded) are unkeyed hashes "
            "of names and content; rebuild the file (add the sources to a new one) to replace them"
        )
    return {**info.__dict__, "notes": notes}


def _model_status(workspace: Workspace) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        embedder = workspace.embedder
        load = getattr(embedder, "load", None)
        if callable(load):
            load()
        fingerprint = embedder.fingerprint
    except Exception as exc:  # doctor reports problems rather than failing on them
        return {"ok": False, "error": str(exc)}
    with workspace.lock:
        recorded = recorded_model(workspace.conn)
    status: dict[str, Any] = {
        "ok": recorded is None or recorded == fingerprint,
        "fingerprint": fingerprint.__dict__,
        "load_seconds": round(time.perf_counter() - started, 3),
    }
    if recorded is not None and recorded != fingerprint:
        status["error"] = "the configured model differs from the recorded one: run `kbmcp reembed`"
    return status


def reembed(
    workspace: Workspace,
    principal: Principal,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Re-embed every current chunk with the configured model and record it as the file's model.

    Vectors are computed first, outside any transaction and without the workspace lock (the rule
    in docs/architecture.md); the switch (drop the old vectors and index, write the new ones) is
    one transaction, so searches see either the old model's vectors or the new one's, never a
    mix. Chunks that another writer added (or retitled) while the vectors were computed are
    found inside that transaction: it is then abandoned, the late chunks are embedded outside
    it, and the switch is tried again (at most REEMBED_ROUNDS times).
    """
    principal.require(ADMIN)
    started = time.perf_counter()
    conn = workspace.conn
    embedder = workspace.embedder
    with workspace.lock:
        rows = conn.execute(SELECT_CURRENT_CHUNKS).fetchall()
    vectors = _embed_chunks(embedder, rows, progress)
    for _round in range(REEMBED_ROUNDS):
        try:
            with workspace.lock, write_transaction(conn):
                rows = conn.execute(SELECT_CURRENT_CHUNKS).fetchall()
                late = [row for row in rows if vectors.get(row[0], ("", b""))[0] != _input_of(row)]
                if late:
                    raise _LateChunks(late)
                previous = recorded_model(conn)
                record_model(conn, embedder.fingerprint)
                store_vectors(conn, [(row[0], vectors[row[0]][1]) for row in rows])
                # Only published documents are in the vec0 index; FTS5 rows do not depend on the
                # model.
                index_vectors(conn, [(row[0], vectors[row[0]][1]) for row in rows if row[4]])
            break
        except _LateChunks as changed:
            vectors.update(_embed_chunks(embedder, changed.rows, None))
    else:
        raise StoreError(
            f"documents kept changing while re-embedding ({REEMBED_ROUNDS} tries): "
            "run `kbmcp reembed` again when ingest is quieter",
            details={"rounds": REEMBED_ROUNDS},
        )
    return {
        "previous_model": None if previous is None else previous.__dict__,
        "model": embedder.fingerprint.__dict__,
        "chunks": len(rows),
        "seconds": round(time.perf_counter() - started, 3),
    }


class _LateChunks(Exception):
    """Chunks written while the vectors were computed: the switch is rolled back and retried."""

    def __init__(self, rows: list[tuple]) -> None:
        super().__init__(f"{len(rows)} late chunks")
        self.rows = rows


def _input_of(row: tuple) -> str:
    _chunk_id, title, heading, text, _indexed = row
    return chunk_embedding_input(title, json.loads(heading), text)


def _embed_chunks(
    embedder: Embedder, rows: list[tuple], progress: Callable[[int, int], None] | None
) -> dict[int, tuple[str, bytes]]:
    """chunk id -> (embedding input, vector) for rows of SELECT_CURRENT_CHUNKS, in batches."""
    vectors: dict[int, tuple[str, bytes]] = {}
    for start in range(0, len(rows), REEMBED_BATCH):
        batch = rows[start : start + REEMBED_BATCH]
        inputs = [_input_of(row) for row in batch]
        embedded = embedder.embed(inputs)
        for row, text, vector in zip(batch, inputs, embedded, strict=True):
            vectors[row[0]] = (text, to_blob(vector))
        if progress:
            progress(min(start + REEMBED_BATCH, len(rows)), len(rows))
    return vectors


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
