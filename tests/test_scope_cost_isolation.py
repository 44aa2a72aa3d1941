"""A filtered scope must cost what the caller's own data costs, whatever other tenants store.

Known gap (strict xfail until fixed): the tag and path-prefix filters find the matching
documents of every store through indexes on (key, value) and (path), then keep the readable
ones, so the work of resolving Alice's scope grows with Bob's documents carrying the same tag or
path prefix, and the server's search time tells Alice about Bob's data (measured on a long-lived
workspace: 3-4 ms with no such documents of Bob's, 12-13 ms with 20,000). The work is counted
here in SQLite virtual-machine steps (a progress handler called at every step), which no load
on the machine changes: the same scope over the same caller's data must take the same steps.
Today, with Bob's 400 notes against his 1: 33,225 steps against 2,025 for the tag filter, 13,869
against 1,101 for the path prefix. The fix is a schema change on both backends (the store id
leading the tag, metadata and path indexes, the filters reading within the readable stores).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from kbmcp.search.scope import Scope
from kbmcp.store.sqlite.search.scope import filter_documents, scope_chunk_ids
from tests.cli_support import Run

pytestmark = pytest.mark.sqlite_only("file: counts SQLite's virtual-machine steps")

ALICE_DOCUMENTS = 20
BOB_DOCUMENTS = 400


def _notes(folder: Path, count: int) -> Path:
    folder.mkdir()
    for n in range(count):  # the same names in both folders: the same path prefixes
        (folder / f"note{n:04}.md").write_text(f"# Note {n}\n\nrotate the backup key {n}\n")
    return folder


def _file(tmp_path: Path, kbmcp: Callable[..., Run], name: str, bob_tagged: int) -> Path:
    db = tmp_path / f"{name}.db"
    for tenant in ("alice", "bob"):
        assert kbmcp("--db", db, "tenant", "create", tenant).code == 0
    alice = _notes(tmp_path / f"{name}-alice", ALICE_DOCUMENTS)
    assert kbmcp("--db", db, "add", alice, "--kb", "a", "--tenant", "alice",
                 "--tag", "t=x").code == 0  # fmt: skip
    bob = _notes(tmp_path / f"{name}-bob", max(bob_tagged, 1))
    tag = ["--tag", "t=x"] if bob_tagged else ["--tag", "t=other"]
    assert kbmcp("--db", db, "add", bob, "--kb", "b", "--tenant", "bob", *tag).code == 0
    return db


def _steps(db: Path, filters: dict[str, object]) -> int:
    """The VM steps of resolving Alice's scope, as the one-shot path and the server do."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    (alice_kb,) = conn.execute("SELECT id FROM knowledge_base WHERE name = 'a'").fetchone()
    scope = Scope(readable_kb_ids=[alice_kb], filters=filters)
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
    assert chunks is not None and len(chunks) == ALICE_DOCUMENTS  # one chunk per note
    assert kinds
    return steps


@pytest.mark.xfail(
    strict=True,
    reason="known gap: tag and path filters read every store's matching rows (closing note)",
)
@pytest.mark.parametrize(
    "filters", [{"tags": {"t": "x"}}, {"document_paths": ["note"]}], ids=["tag", "path"]
)
def test_a_filtered_scope_costs_the_same_whatever_other_tenants_store(
    tmp_path: Path, kbmcp: Callable[..., Run], filters: dict[str, object]
) -> None:
    alone = _file(tmp_path, kbmcp, "alone", bob_tagged=0)
    crowded = _file(tmp_path, kbmcp, "crowded", bob_tagged=BOB_DOCUMENTS)
    assert _steps(crowded, filters) == _steps(alone, filters)
