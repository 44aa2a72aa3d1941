"""Maintenance: `kbmcp doctor` (what is this database, is the model usable) and `kbmcp reembed`
(kbmcp/service/reembed.py, importable from here).

The report has the same shape on both backends: the database software's versions where SQLite
reports `sqlite`, `apsw` and `sqlite_vec` (PostgreSQL: `postgresql`, `pgvector`, `psycopg`), and
its storage facts where SQLite reports `journal_mode` (PostgreSQL: `hnsw_index`); `db_path` is
the file, or the URL with its password hidden.
"""

from __future__ import annotations

import platform
import sys
import time
from importlib import metadata
from typing import Any

from kbmcp import __version__
from kbmcp.access import ADMIN, Principal
from kbmcp.ids import TEST_KEY_ENV
from kbmcp.service.reembed import reembed
from kbmcp.store.backend import Connection, Store
from kbmcp.workspace import Workspace

__all__ = ["doctor", "reembed"]


def doctor(workspace: Workspace, principal: Principal) -> dict[str, Any]:
    """A report on versions, the database, the model and counts; never raises for a model
    problem. It describes the whole database, so it needs the administrator scope."""
    principal.require(ADMIN)
    report = _database_report(workspace)
    report["model"] = _model_status(workspace)  # loads the model: not while holding the lock
    return report


def _database_report(workspace: Workspace) -> dict[str, Any]:
    store, conn = workspace.store, workspace.conn
    facts = store.admin.database_facts(conn)
    recorded = store.vectors.recorded_model(conn)
    return {
        "kbmcp": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        **facts.software,
        "mcp": _package_version("mcp"),
        "db_path": store.shown,
        "schema_version": facts.schema_version,
        "schema_latest": facts.schema_latest,
        **facts.storage,
        "recorded_model": None if recorded is None else recorded.__dict__,
        "configured_embedder": workspace.settings.embedder,
        "counts": store.admin.counts(conn),
        "id_key": _id_key_report(store, conn),
        "warnings": _file_warnings(workspace),
    }


def _file_warnings(workspace: Workspace) -> list[str]:
    """Files others may read (kbmcp/store/sqlite/files.py): kbmcp creates them 0600. A
    PostgreSQL database's files are the server's to protect."""
    if workspace.store.kind != "sqlite":
        return []
    from kbmcp.store.sqlite.files import loose_permissions

    return loose_permissions(workspace.settings.db_path)


def _id_key_report(store: Store, conn: Connection) -> dict[str, Any] | None:
    """How the database's ids are keyed (docs/security.md, threat model), with a note when they
    are guessable: a key pinned for tests, or ids made before the database had a key."""
    info = store.id_key.id_key_info(conn)
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
        recorded = workspace.store.vectors.recorded_model(workspace.conn)
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
