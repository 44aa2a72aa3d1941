"""Maintenance: `kbmcp doctor` (what is this file, is the model usable) and `kbmcp reembed`
(kbmcp/service/reembed.py, importable from here)."""

from __future__ import annotations

import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import apsw

from kbmcp import __version__
from kbmcp.access import ADMIN, Principal
from kbmcp.ids import TEST_KEY_ENV
from kbmcp.service.reembed import reembed
from kbmcp.store.sqlite.files import loose_permissions
from kbmcp.store.sqlite.id_key import id_key_info
from kbmcp.store.sqlite.migrations import current_version, latest_version
from kbmcp.store.sqlite.vectors import recorded_model
from kbmcp.workspace import Workspace

__all__ = ["doctor", "reembed"]

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
        # Files others may read (kbmcp/store/sqlite/files.py): kbmcp creates them 0600.
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


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
