"""Ingest and reembed hold the workspace lock while they use the connection, never while the
model embeds (docs/architecture.md): a server that ingests keeps answering searches."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service.admin import reembed
from kbmcp.service.ingest import add_paths
from kbmcp.workspace import Workspace


def lock_is_free(workspace: Workspace) -> bool:
    """Whether another thread could take the workspace lock now."""
    taken: list[bool] = []

    def probe() -> None:
        got = workspace.lock.acquire(timeout=1)
        taken.append(got)
        if got:
            workspace.lock.release()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return taken == [True]


class ProbingEmbedder(DelegatingEmbedder):
    """Records, at every call, whether the workspace lock and the file's write lock were free;
    can run a hook once."""

    def __init__(self) -> None:
        super().__init__(HashingEmbedder())
        self.workspace: Workspace | None = None
        self.lock_free: list[bool] = []
        self.hook: Callable[[], None] | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        assert self.workspace is not None
        # free: no thread holds the lock; and no write transaction is open on the file
        free = lock_is_free(self.workspace) and not self.workspace.conn.in_transaction
        self.lock_free.append(free)
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return self.inner.embed(texts)


def test_add_and_reembed_embed_without_the_lock_and_reembed_catches_late_writes(
    db_path: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nText {i}.\n")
    embedder = ProbingEmbedder()
    with Workspace(Settings(db=db_path, embedder="hash"), embedder=embedder) as workspace:
        embedder.workspace = workspace
        assert add_paths(workspace, workspace.local_principal(), [folder]).added == 3
        assert embedder.lock_free and all(embedder.lock_free)

        late = tmp_path / "late"
        late.mkdir()
        (late / "late.md").write_text("# Late\n\nWritten while reembed embeds.\n")

        def another_process_adds_a_document() -> None:
            settings = Settings(db=db_path, embedder="hash")
            with Workspace(settings, embedder=HashingEmbedder()) as other:
                add_paths(other, other.local_principal(), [late])

        embedder.lock_free.clear()
        embedder.hook = another_process_adds_a_document
        result = reembed(workspace, workspace.local_principal())
        assert all(embedder.lock_free) and len(embedder.lock_free) == 2  # all, then the late one
        total = workspace.conn.execute("SELECT count(*) FROM chunk_vec").fetchone()[0]
        assert result["chunks"] == total == 4
        stored = workspace.conn.execute(
            "SELECT count(*) FROM chunk c JOIN chunk_vector v ON v.chunk_id = c.id"
        ).fetchone()[0]
        assert stored == 4
