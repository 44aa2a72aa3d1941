"""A filtered scope must cost what the caller's own data costs, whatever other tenants store.

The tag, metadata and path-prefix filters once found the matching documents of every store
through indexes on (key, value) and on (path), then kept the readable ones: the work of
resolving Alice's scope grew with Bob's documents carrying the same tag or path prefix, and a
server's search time told Alice about Bob's data (3-4 ms with no such documents of Bob's, 12-13
ms with 20,000; in the VM steps counted below, before the fix: 33,225 against 2,025 for a tag
with Bob's 400 notes against his 1). Since migration 11 every such index leads with the store,
and the filters read one range of it per readable store.

The work is counted in SQLite virtual-machine steps (a progress handler called at every step),
which no load on the machine changes: the same scope over the same caller's data must take the
same number of steps. Alice's rows are written first, so her ids are the same in both files.
PostgreSQL's counterpart: tests/test_scope_cost_isolation_postgres.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.resolved import Scope
from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.store.sqlite.search.scope import filter_documents, scope_chunk_ids
from kbmcp.workspace import Workspace

pytestmark = pytest.mark.sqlite_only("file: counts SQLite's virtual-machine steps")

ALICE_NOTES = 20
ALICE_MEMORIES = 10
BOB_NOTES = 150
BOB_MEMORIES = 40
MATCHING = {"tag": ("t", "x"), "metadata": ("team", "ops")}  # Alice's (Bob's too, when crowded)


@dataclass(frozen=True)
class Tenants:
    db: Path | str  # a file, or a PostgreSQL URL (tests/test_scope_cost_isolation_postgres.py)
    alice_kb: int
    alice_store: int


def _notes(folder: Path, count: int) -> Path:
    folder.mkdir()
    for n in range(count):  # the same names in both folders: the same path prefixes
        (folder / f"note{n:04}.md").write_text(f"# Note {n}\n\nrotate the backup key {n}\n")
    return folder


def build(root: Path, name: str, db: Path | str, *, crowded: bool) -> Tenants:
    """Alice's notes and memories; then Bob's, many and matching Alice's filters when
    `crowded`, a single non-matching one of each otherwise."""
    ws = Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder())
    admin = ws.local_principal()
    for tenant, notes, memory_count, match in (
        ("alice", ALICE_NOTES, ALICE_MEMORIES, True),
        ("bob", BOB_NOTES if crowded else 1, BOB_MEMORIES if crowded else 1, crowded),
    ):
        create_tenant(ws, admin, tenant)
        principal = act_as_tenant(ws, admin, tenant)
        tag, meta = (pair if match else (pair[0], "other") for pair in MATCHING.values())
        options = IngestOptions(knowledge_base=tenant, tags=[tag], metadata=[meta])
        add_paths(ws, principal, [_notes(root / f"{name}-{tenant}", notes)], options)
        for n in range(memory_count):
            memories.remember(ws, principal, f"{tenant} fact {n}", tags=dict([tag]))
    (alice_kb,) = ws.conn.execute("SELECT id FROM knowledge_base WHERE name = 'alice'").fetchone()
    (alice_store,) = ws.conn.execute(
        "SELECT kb.id FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id"
        " WHERE t.name = 'alice' AND kb.kind = 'memories'"
    ).fetchone()
    ws.close()
    return Tenants(db, alice_kb, alice_store)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tenants, Tenants]]:
    root = tmp_path_factory.mktemp("isolation")
    yield (
        build(root, "alone", root / "alone.db", crowded=False),
        build(root, "crowded", root / "crowded.db", crowded=True),
    )


def _resolve(tenants: Tenants, scope: Scope) -> tuple[int, list[int], list[object]]:
    """Alice's scope resolved as the one-shot path and the server do: the VM steps it took, its
    chunk ids, and the per-kind document sets an accelerator reads."""
    conn = apsw.Connection(str(tenants.db), flags=apsw.SQLITE_OPEN_READONLY)
    steps = 0

    def count() -> bool:
        nonlocal steps
        steps += 1
        return False  # go on

    conn.set_progress_handler(count, 1)
    chunks = scope_chunk_ids(conn, scope)
    kinds = filter_documents(conn, scope)
    conn.set_progress_handler(None)
    conn.close()
    assert chunks is not None
    parts = [(kind.stores, None if kind.documents is None else kind.documents.tolist())
             for kind in kinds]  # fmt: skip
    return steps, chunks.tolist(), parts


def alice_scope(tenants: Tenants, name: str) -> Scope:
    """Alice's scope with filter `name` (of FILTERS); the tag filter covers her memories too."""
    memory_stores = [tenants.alice_store] if name == "tag" else None
    return Scope(readable_kb_ids=[tenants.alice_kb], memory_store_ids=memory_stores,
                 filters=FILTERS[name])  # fmt: skip


FILTERS = {
    # A resolved scope's tags are [key, value] pairs (kbmcp/search/scope.py `_tags`).
    "tag": {"tags": [list(MATCHING["tag"])]},
    "metadata": {"metadata": dict([MATCHING["metadata"]])},
    "path": {"document_paths": ["note"]},
    "tag+path": {"tags": [list(MATCHING["tag"])], "document_paths": ["note00"]},
}
# Chunks of Alice's that each filter selects (one chunk per note and per memory); the memory
# tag filter also matches her memories, the document-only filters leave them out.
EXPECTED_CHUNKS = {"tag": ALICE_NOTES + ALICE_MEMORIES, "metadata": ALICE_NOTES,
                   "path": ALICE_NOTES, "tag+path": ALICE_NOTES}  # fmt: skip


@pytest.mark.parametrize("name", list(FILTERS))
def test_a_filtered_scope_costs_the_same_whatever_other_tenants_store(
    files: tuple[Tenants, Tenants], name: str
) -> None:
    alone, crowded = files
    assert (alone.alice_kb, alone.alice_store) == (crowded.alice_kb, crowded.alice_store)
    scope = alice_scope(alone, name)
    steps_alone, chunks_alone, kinds_alone = _resolve(alone, scope)
    steps_crowded, chunks_crowded, kinds_crowded = _resolve(crowded, scope)
    assert len(chunks_alone) == EXPECTED_CHUNKS[name]
    assert (chunks_crowded, kinds_crowded) == (chunks_alone, kinds_alone)
    assert steps_crowded == steps_alone


def test_the_count_sees_other_tenants_work_when_a_scope_reads_it(
    files: tuple[Tenants, Tenants],
) -> None:
    """The check above can fail: a scope over both tenants' stores, whose work does grow with
    Bob's matching notes, takes more steps in the crowded file."""
    alone, crowded = files
    with apsw.Connection(str(crowded.db), flags=apsw.SQLITE_OPEN_READONLY) as conn:
        every_kb = [
            row[0] for row in conn.execute("SELECT id FROM knowledge_base WHERE kind != 'memories'")
        ]
    scope = Scope(readable_kb_ids=every_kb, filters=FILTERS["tag"])
    steps_alone, _, _ = _resolve(alone, scope)
    steps_crowded, chunks_crowded, _ = _resolve(crowded, scope)
    assert len(chunks_crowded) == ALICE_NOTES + BOB_NOTES
    assert steps_crowded > 2 * steps_alone
