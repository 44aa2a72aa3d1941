"""One snapshot per search: what the caller may read is decided where the ranking runs.

A caller that reads every store of the file is searched without an allow-list (the scope is
"every indexed chunk"). If that were decided before the query is embedded, a store another
tenant commits while the query is embedded would be searched too. The embedder here commits
exactly that, from another connection, in the middle of the search: another tenant's first
memory store, holding a memory with the query's words. Nothing of it may come back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Principal
from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchRequest
from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.workspace import Workspace
from tests.mcp_support import hash_workspace, write

QUERY = "lantern harbour"


class CommittingEmbedder(DelegatingEmbedder):
    """Runs `commit` (once) while embedding the first text it is given."""

    def __init__(self, commit: Callable[[], None]) -> None:
        super().__init__(HashingEmbedder())
        self.commit: Callable[[], None] | None = commit

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        commit, self.commit = self.commit, None
        if commit is not None:
            commit()
        return self.inner.embed(texts)


@pytest.fixture
def file_of_acme(tmp_path: Path) -> Iterator[tuple[Path, Principal]]:
    """A file whose only store is tenant acme's knowledge base; tenant beta exists, owns
    nothing yet. The caller: acme with knowledge:read and memory:read (it reads every store)."""
    db = tmp_path / "kb.db"
    folder = write(tmp_path / "ops", {"lantern.md": "# Lantern\n\nThe harbour lantern runbook.\n"})
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        create_tenant(ws, admin, "acme")
        create_tenant(ws, admin, "beta")
        acme = act_as_tenant(ws, admin, "acme")
        add_paths(ws, acme, [folder], IngestOptions(knowledge_base="ops"))
    caller = Principal(
        acme.tenant_id, acme.tenant_public_id, scopes=frozenset({KNOWLEDGE_READ, MEMORY_READ})
    )
    yield db, caller


def _beta_remembers(db: Path) -> None:
    with hash_workspace(db) as writer:
        beta = act_as_tenant(writer, writer.local_principal(), "beta")
        memories.remember(writer, beta, "Beta's secret: the lantern of the harbour is red.")


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "rrf"])
@pytest.mark.parametrize("long_lived", [True, False], ids=["server", "one-shot"])
def test_a_store_committed_while_embedding_is_not_searched(
    file_of_acme: tuple[Path, Principal], mode: str, long_lived: bool
) -> None:
    db, caller = file_of_acme
    embedder = CommittingEmbedder(lambda: _beta_remembers(db))
    settings = Settings(db=db, embedder="hash")
    with Workspace(settings, embedder=embedder, long_lived=long_lived) as ws:
        if long_lived:  # a warm server: its copies were built before the commit
            search(ws, caller, SearchRequest(QUERY, mode="lexical"))
        response = search(ws, caller, SearchRequest(QUERY, mode=mode, limit=20))
        assert embedder.commit is None  # the commit happened during this search
        kinds = {result.kind for result in response.results}
        assert kinds == {"document"}, [r.excerpt for r in response.results]
        # The memory is there, and beta finds it with the same request.
        beta = act_as_tenant(ws, ws.local_principal(), "beta")
        found = search(ws, beta, SearchRequest(QUERY, mode=mode, limit=20)).results
        assert [result.kind for result in found] == ["memory"]
