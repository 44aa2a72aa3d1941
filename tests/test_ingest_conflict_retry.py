"""A batch's write transaction that PostgreSQL cancels for a conflict with another transaction (a
deadlock, 40P01; on Citus also a shard move's: docs/scale-out.md) is run again, whole, instead of
failing the batch's documents (kbmcp/service/ingest_batch.py, CONFLICT_SQLSTATES)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import errors as pg_errors

from kbmcp.service import ingest_batch
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.ingest_write import DocumentWriter
from kbmcp.workspace import Workspace
from tests.mcp_support import hash_workspace, write


@pytest.fixture
def ws(new_postgres_url: str) -> Iterator[Workspace]:
    with hash_workspace(new_postgres_url) as workspace:
        yield workspace


def _cancel_first_writes(monkeypatch: pytest.MonkeyPatch, times: int) -> list[str]:
    """The first `times` document writes are cancelled as a deadlock victim's would be."""
    cancelled: list[str] = []
    write_document = DocumentWriter.write

    def write_or_cancel(self: DocumentWriter, document, vectors):  # type: ignore[no-untyped-def]
        if len(cancelled) < times:
            cancelled.append(document.path)
            raise pg_errors.DeadlockDetected("deadlock detected")
        return write_document(self, document, vectors)

    monkeypatch.setattr(DocumentWriter, "write", write_or_cancel)
    return cancelled


def test_a_cancelled_batch_is_written_again_whole(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write(tmp_path / "notes", {"a.md": "# A\n\nAlpha.\n", "b.md": "# B\n\nBeta.\n"})
    cancelled = _cancel_first_writes(monkeypatch, ingest_batch.CONFLICT_ATTEMPTS - 1)
    report = add_paths(ws, ws.local_principal(), [folder], IngestOptions(knowledge_base="kb"))
    assert len(cancelled) == ingest_batch.CONFLICT_ATTEMPTS - 1
    assert (report.added, report.errors) == (2, [])
    rows = ws.conn.execute("SELECT count(*) FROM document WHERE status = 'published'").fetchone()
    assert rows == (2,)


def test_a_batch_cancelled_every_time_fails_and_writes_nothing(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write(tmp_path / "notes", {"a.md": "# A\n\nAlpha.\n"})
    _cancel_first_writes(monkeypatch, ingest_batch.CONFLICT_ATTEMPTS)
    with pytest.raises(Exception) as raised:
        add_paths(ws, ws.local_principal(), [folder], IngestOptions(knowledge_base="kb"))
    assert "deadlock" in str(raised.value)
    assert ws.conn.execute("SELECT count(*) FROM document").fetchone() == (0,)
