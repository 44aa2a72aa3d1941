"""Property: what other tenants store never changes anything a caller's search returns.

Hypothesis draws a caller (a tenant reading its knowledge bases and memories, a knowledge-only
token, or a token limited to one knowledge base), a few requests (modes, filters, phrases,
candidate depths, pruning of common terms on or off) and two rounds of writes by another tenant
(documents added, rewritten and archived; memories remembered and forgotten; its first store
created by them, so a caller that read every store no longer does). The caller's requests run
before and after the second round, on a fresh server workspace (accelerators) and a fresh
one-shot workspace (SQL alone), and every field of every response must be the same (ids, order,
scores, excerpts, stats; not elapsed_ms). The server's and the one-shot's results must agree too.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Principal
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.models import MODES, SearchFilters, SearchRequest, SearchResponse
from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths, archive_document
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.workspace import Workspace
from tests.mcp_support import hash_workspace, write

WORDS = [
    "the", "of", "and", "lantern", "harbour", "budget", "error", "rotate", "keys", "backup",
    "vector", "index", "zebra", "crossing", "policy", "tide",
]  # fmt: skip
EXAMPLES = 150


@dataclasses.dataclass(frozen=True)
class Base:
    db: Path
    callers: dict[str, Principal]
    kb_ids: dict[str, str]  # the caller's knowledge bases: name -> kb_ id


def _text(words: list[str]) -> str:
    return " ".join(words)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """Tenant `me` with two knowledge bases and memories; tenant `them` with nothing yet."""
    root = tmp_path_factory.mktemp("isolation")
    db = root / "kb.db"
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        create_tenant(ws, admin, "me")
        create_tenant(ws, admin, "them")
        me = act_as_tenant(ws, admin, "me")
        for kb, offset in (("alpha", 0), ("beta", 5)):
            files = {
                f"{kb}/doc{i}.md": f"# {WORDS[(i + offset) % 16]} notes\n\n"
                + _text([WORDS[(i * 7 + j * 3 + offset) % 16] for j in range(12 + i)])
                + "\n"
                for i in range(6)
            }
            add_paths(ws, me, [write(root / kb, files)], IngestOptions(knowledge_base=kb))
        for i in range(4):
            memories.remember(ws, me, _text([WORDS[(i * 5 + j) % 16] for j in range(6)]))
        kb_ids = {
            name: public_id
            for name, public_id in ws.conn.execute(
                "SELECT name, public_id FROM knowledge_base WHERE kind = 'documents'"
            )
        }
    both = frozenset({KNOWLEDGE_READ, MEMORY_READ})
    callers = {
        "tenant": Principal(me.tenant_id, me.tenant_public_id, both),
        "knowledge_token": Principal(
            me.tenant_id, me.tenant_public_id, frozenset({KNOWLEDGE_READ})
        ),
        "one_kb_token": Principal(
            me.tenant_id, me.tenant_public_id, both,
            knowledge_base_allowlist=frozenset({kb_ids["alpha"]}),
        ),
    }  # fmt: skip
    return Base(db, callers, kb_ids)


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(["theirs", "more"]), words),
        st.tuples(st.just("rewrite"), st.integers(0, 5), words),
        st.tuples(st.just("archive"), st.integers(0, 5)),
        st.tuples(st.just("remember"), words),
        st.tuples(st.just("forget"), st.integers(0, 5)),
    ),
    max_size=4,
)


@st.composite
def queries(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5))
    if len(parts) >= 3 and draw(st.booleans()):  # a phrase
        parts = [*parts[:-2], f'"{parts[-2]} {parts[-1]}"']
    return " ".join(parts)


FILTERS = {
    "none": lambda kb_ids: SearchFilters(),
    "alpha": lambda kb_ids: SearchFilters(knowledge_base_ids=[kb_ids["alpha"]]),
    "path": lambda kb_ids: SearchFilters(document_paths=["alpha/doc1", "alpha/doc2"]),
    "documents": lambda kb_ids: SearchFilters(include_memories=False),
    "memories": lambda kb_ids: SearchFilters(include_documents=False),
}

requests = st.lists(
    st.tuples(
        queries(),
        st.sampled_from(MODES),
        st.sampled_from(sorted(FILTERS)),
        st.sampled_from([None, 3]),
    ),
    min_size=1,
    max_size=3,
)


class Foreign:
    """Another tenant's writes, through the service as that tenant would make them."""

    def __init__(self, db: Path, folder: Path) -> None:
        self.db = db
        self.folder = folder
        self.documents: list[str] = []  # public ids of its documents, in creation order
        self.memories: list[str] = []

    def apply(self, operations: list[tuple]) -> None:
        with hash_workspace(self.db) as ws:
            them = act_as_tenant(ws, ws.local_principal(), "them")
            for operation in operations:
                self._apply(ws, them, operation)

    def _apply(self, ws: Workspace, them: Principal, operation: tuple) -> None:
        kind = operation[0]
        if kind in ("rewrite", "archive") and not self.documents:
            operation = ("add", "theirs", WORDS[operation[1] :] or WORDS)  # a change all the same
        elif kind == "forget" and not self.memories:
            operation = ("remember", WORDS[operation[1] :] or WORDS)
        kind = operation[0]
        if kind == "add":
            _, kb, text = operation
            path = f"{kb}/doc{len(self.documents)}.md"
            self._ingest(ws, them, kb, path, text)
        elif kind == "rewrite":
            _, index, text = operation
            kb, path = self.documents[index % len(self.documents)].split(":", 1)
            self._ingest(ws, them, kb, path, text)
        elif kind == "archive":
            kb, path = self.documents[operation[1] % len(self.documents)].split(":", 1)
            row = ws.conn.execute(
                "SELECT d.public_id FROM document AS d JOIN knowledge_base AS kb "
                "ON kb.id = d.knowledge_base_id WHERE kb.name = ? AND d.path = ? "
                "AND d.status = 'published'",
                (kb, path.split("/", 1)[1]),
            ).fetchone()
            if row is not None:
                archive_document(ws, them, row[0])
        elif kind == "remember":
            self.memories.append(memories.remember(ws, them, _text(operation[1])).memory_id)
        elif kind == "forget":
            memories.forget(ws, them, self.memories[operation[1] % len(self.memories)])

    def _ingest(self, ws: Workspace, them: Principal, kb: str, path: str, words: list[str]) -> None:
        key = f"{kb}:{path}"
        if key not in self.documents:
            self.documents.append(key)
        root = self.folder / kb
        write(root, {path: f"# {words[0]}\n\n{_text(words)}\n"})
        add_paths(ws, them, [root / path.split("/", 1)[0]], IngestOptions(knowledge_base=kb))


def _fields(response: SearchResponse) -> dict[str, Any]:
    body = dataclasses.asdict(response)
    body["stats"]["elapsed_ms"] = None
    return body


def _run(db: Path, caller: Principal, wanted: list[SearchRequest]) -> list[list[dict[str, Any]]]:
    """Every request on a fresh server workspace, then on a fresh one-shot workspace."""
    out = []
    for long_lived in (True, False):
        with Workspace(
            Settings(db=db, embedder="hash"), embedder=HashingEmbedder(), long_lived=long_lived
        ) as ws:
            out.append([_fields(search(ws, caller, request)) for request in wanted])
    return out


@pytest.fixture
def pruning() -> Iterator[None]:
    saved = channel.STOPWORD_MIN_ROWS
    try:
        yield
    finally:
        channel.STOPWORD_MIN_ROWS = saved


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    caller=st.sampled_from(["tenant", "knowledge_token", "one_kb_token"]),
    wanted=requests,
    before=operations,
    change=operations.filter(bool),
    prune=st.booleans(),
)
def test_other_tenants_writes_never_change_a_callers_results(
    base: Base,
    pruning: None,
    caller: str,
    wanted: list[tuple[str, str, str, int | None]],
    before: list[tuple],
    change: list[tuple],
    prune: bool,
) -> None:
    # Pruning of common terms needs 1000 indexed chunks by default; 0 exercises it here.
    channel.STOPWORD_MIN_ROWS = 0 if prune else 10**9
    principal = base.callers[caller]
    search_requests = [
        SearchRequest(
            query, mode=mode, limit=20, candidates=depth, filters=FILTERS[name](base.kb_ids)
        )
        for query, mode, name, depth in wanted
        if not (caller == "knowledge_token" and name == "memories")
    ]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "kb.db"
        shutil.copyfile(base.db, db)
        foreign = Foreign(db, Path(tmp) / "foreign")
        foreign.apply(before)
        first = _run(db, principal, search_requests)
        foreign.apply(change)
        second = _run(db, principal, search_requests)
    assert second == first
    if not prune:  # pruned terms are left out of the FTS5 path's scores (~1e-6: fts.py)
        server, one_shot = first
        for cached, plain in zip(server, one_shot, strict=True):
            assert cached["results"] == plain["results"]  # bit for bit, on both paths
