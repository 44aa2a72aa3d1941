"""The memories concern (kbmcp/store/memories.py): the memory listings, forget and remember
answer the same on SQLite and on a PostgreSQL copy of the file (ids unchanged), errors
included, for callers who see different parts of the corpus."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from kbmcp.service import memories
from kbmcp.workspace import Workspace
from tests.backend_twins import outcome, principals, twin_workspaces
from tests.mcp_support import T2, pinned_clock

FACT = "The deploy key rotates on the first Monday of each month."
QUOKKA = "Quokka feeding moved to two in the afternoon."


# ------------------------------------------------------------------ one corpus, two backends


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[Workspace, Workspace]]:
    yield from twin_workspaces(tmp_path_factory.mktemp("memories"), postgres_url)


def test_listings_answer_the_same(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    listed = 0
    for principal in principals(sqlite).values():
        calls: list[Callable[[Workspace], Any]] = [
            partial(memories.list_memory_stores, principal=principal),
            partial(memories.resolve_memory_stores, principal=principal,
                    names_or_ids=["journal", "memories", "mst_0000000000000000"]),
            partial(memories.resolve_memory_stores, principal=principal, names_or_ids=["journal"]),
            partial(memories.list_memories, principal=principal, memory_store="nope"),
            partial(memories.list_memories, principal=principal, limit=0),
        ]  # fmt: skip
        for include_forgotten in (False, True):
            for limit in (1, 2, 1000):
                for store in (None, "journal"):
                    calls.append(partial(memories.list_memories, principal=principal,
                                         memory_store=store, limit=limit,
                                         include_forgotten=include_forgotten))  # fmt: skip
        for call in calls:
            want = outcome(partial(call, sqlite))
            assert outcome(partial(call, pg)) == want, call
            listed += isinstance(want, list) and len(want)
    assert listed > 0
    everything = memories.list_memories(pg, sqlite.local_principal(), include_forgotten=True)
    assert {m.status for m in everything} == {"published", "forgotten"}
    order = [(m.updated_at, m.memory_id) for m in everything]
    assert order == sorted(order, key=lambda key: ([-b for b in key[0].encode()], key[1]))


def test_forget_and_remember_answer_the_same_on_the_copy(
    twins: tuple[Workspace, Workspace],
) -> None:
    """The same writes on the file and on its PostgreSQL copy: same ids, outcomes, errors."""
    sqlite, pg = twins
    answers = []
    for principal in principals(sqlite).values():
        found = memories.list_memories(sqlite, sqlite.local_principal(), include_forgotten=True)
        for memory in found:
            for call in (
                partial(memories.forget, principal=principal, memory_id=memory.memory_id),
                partial(memories.remember, principal=principal, content=memory.content,
                        memory_store_id=memory.memory_store_id, tags={"seen": "again"}),
            ):  # fmt: skip
                with pinned_clock(T2):
                    want = outcome(partial(call, sqlite))
                    assert outcome(partial(call, pg)) == want, call
                answers.append(want)
    codes = {a["error"]["code"] for a in answers if isinstance(a, dict)}
    assert {"forbidden", "resource_unavailable"} <= codes
    outcomes = {getattr(a, "outcome", None) for a in answers}
    assert {"forgotten", "already_forgotten", "restored"} <= outcomes
