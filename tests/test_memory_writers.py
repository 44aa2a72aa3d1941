"""The memory service on a fresh database of each kind: every path of remember, forget and the
listings answers the same on SQLite and on PostgreSQL, errors included; a remembered memory is
found by search through the service on both; and writers that remember at once (two servers on
one database, or a CLI beside a server) never duplicate a memory nor lose each other's tags."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from kbmcp.access import MEMORY_WRITE, Principal
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service import memories
from kbmcp.service.ingest_batch import IngestBatch
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.workspace import Workspace
from tests.backend_twins import outcome
from tests.mcp_support import T0, T1, T2, pinned_clock

FACT = "The deploy key rotates on the first Monday of each month."
QUOKKA = "Quokka feeding moved to two in the afternoon."


# ------------------------------------------------------------------ a fresh database of each kind


def script(ws: Workspace) -> list[Any]:
    """Every path of the memory service, in order, with the clock pinned: its answers."""
    admin = ws.local_principal()
    answers: list[Any] = []

    def run(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        answer = outcome(partial(call, ws, *args, **kwargs))
        answers.append(answer)
        return answer

    with pinned_clock(T0):
        run(memories.list_memory_stores, admin)
        ops = run(memories.create_memory_store, admin, "ops", tags={"team": "ops"})
        run(memories.create_memory_store, admin, "ops")
        run(memories.create_memory_store, admin, "Ops")
        run(memories.create_memory_store, admin, "bad\x00name")
        first = run(memories.remember, admin, FACT, tags={"topic": "deploy"}, source="chat 7")
        run(memories.remember, admin, f"  {FACT}\n", tags={"team": "ops"})
        run(memories.remember, admin, FACT, memory_store_id=ops.memory_store_id)
        quokka = run(memories.remember, admin, QUOKKA)
        for bad in ("", 42, "nul \x00 inside", "lone \ud800 surrogate"):
            run(memories.remember, admin, bad)
        run(memories.remember, admin, FACT, tags={"k": "v\x00"})
        run(memories.remember, admin, FACT, source="s\x00")
        run(memories.remember, admin, FACT, memory_store_id="ops")
        run(memories.remember, admin, FACT, memory_store_id="mst_0000000000000000")
    with pinned_clock(T1):
        run(memories.remember, admin, "The deploy key rotates weekly.", memory_id=first.memory_id)
        run(memories.remember, admin, QUOKKA, memory_id=first.memory_id)  # held by another
        run(memories.forget, admin, quokka.memory_id)
        run(memories.forget, admin, quokka.memory_id)
        run(memories.forget, admin, "mem_0000000000000000")
        run(memories.forget, admin, None)
        run(memories.list_memories, admin, include_forgotten=True)
    with pinned_clock(T2):
        run(memories.remember, admin, QUOKKA, tags={"back": "yes"})
        create_tenant(ws, admin, "acme")
        acme = act_as_tenant(ws, admin, "acme")
        writer = Principal(acme.tenant_id, acme.tenant_public_id, frozenset({MEMORY_WRITE}))
        run(memories.remember, acme, FACT)
        run(memories.remember, writer, FACT, tags={"x": "y"})  # blind: 'stored'
        run(memories.remember, writer, "Only the writer knows.")
        run(memories.forget, acme, first.memory_id)  # another tenant's: unavailable
        run(memories.list_memories, acme)
        run(memories.list_memories, writer)
        run(memories.list_memory_stores, admin)
        run(memories.list_memories, admin, memory_store="ops", include_forgotten=True)
        run(memories.resolve_memory_stores, admin, ["ops", "memories"])
    return answers


def test_every_path_answers_the_same_on_both(tmp_path: Path, fresh_postgres_url: str) -> None:
    answers = []
    for db in (tmp_path / "kb.db", fresh_postgres_url):
        settings = Settings(db=db, embedder="hash")
        with Workspace(settings, embedder=HashingEmbedder(), create=True) as ws:
            answers.append(script(ws))
    sqlite, pg = answers
    assert len(pg) == len(sqlite)
    for want, got in zip(sqlite, pg, strict=True):
        assert got == want
    outcomes = [getattr(a, "outcome", None) for a in sqlite]
    assert {"created", "existing", "revised", "restored", "stored", "forgotten"} <= set(outcomes)
    errors = [a["error"]["details"].get("argument") for a in sqlite if isinstance(a, dict)]
    assert {"content", "name", "memory_id", "memory_store_id", "tags", "source"} <= set(errors)


def test_a_remembered_memory_is_found_through_the_service(backend_workspace: Workspace) -> None:
    ws = backend_workspace
    admin = ws.local_principal()
    remembered = memories.remember(ws, admin, FACT, tags={"topic": "deploy"})
    memories.remember(ws, admin, QUOKKA)
    for mode in ("lexical", "semantic", "hybrid", "rrf"):
        request = SearchRequest(query="when does the deploy key rotate", mode=mode,
                                filters=SearchFilters(tags={"topic": "deploy"}))  # fmt: skip
        hits = search(ws, admin, request).results
        assert [(hit.kind, hit.document_id) for hit in hits] == [
            ("memory", remembered.memory_id)
        ], mode
    memories.forget(ws, admin, remembered.memory_id)
    request = SearchRequest(query="deploy key rotate", mode="hybrid")
    assert [hit.document_id for hit in search(ws, admin, request).results] != [remembered.memory_id]
    assert remembered.memory_id not in {
        hit.document_id for hit in search(ws, admin, request).results
    }


def test_a_write_only_token_cannot_guess_a_memory_by_revising_its_own(
    backend_workspace: Workspace,
) -> None:
    """Issue 32, item 2: revising its own memory into text another memory of the store holds
    was refused ("another memory of this store already holds this content") exactly when the
    guess was right, so 100 guesses found a stored account number. A caller without memory:read
    gets the same answer for every guess, and the write it asked for happens."""
    ws = backend_workspace
    admin = ws.local_principal()
    create_tenant(ws, admin, "acme")
    acme = act_as_tenant(ws, admin, "acme")
    secret = "The account number is 4417"
    memories.remember(ws, acme, secret)
    writer = Principal(acme.tenant_id, acme.tenant_public_id, frozenset({MEMORY_WRITE}))
    mine = memories.remember(ws, writer, "A note of the writer's own.").memory_id
    answers = {}
    for guess in ("4415", "4416", "4417", "4418"):
        answer = outcome(partial(memories.remember, ws, writer, f"The account number is {guess}",
                                 memory_id=mine))  # fmt: skip
        assert not isinstance(answer, dict), (guess, answer)  # never an error
        answers[guess] = (answer.memory_id, answer.outcome, tuple(answer.tags))
    assert set(answers.values()) == {(mine, "stored", ())}
    # Its memory holds its last guess; the stored secret is untouched and still the one that
    # answers a reader remembering it again.
    again = memories.remember(ws, acme, secret)
    assert again.outcome == "existing" and again.memory_id != mine
    held = {m.memory_id: m.content for m in memories.list_memories(ws, acme)}
    assert held[mine] == "The account number is 4418"
    assert held[again.memory_id] == secret


# ------------------------------------------------------------------ writers at once


def second_workspace(ws: Workspace) -> Workspace:
    return Workspace(Settings(db=ws.settings.db, embedder="hash"), embedder=HashingEmbedder())


def test_a_memory_written_between_read_and_write_is_not_overwritten(
    backend_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process remembers the same content (with other tags) after this call read the
    store and before it writes: the write finds it, writes nothing, reads it again, and answers
    'existing' with both callers' tags; one memory, one revision."""
    ws = backend_workspace
    admin = ws.local_principal()
    memories.remember(ws, admin, QUOKKA)  # the default store exists
    flush = IngestBatch.flush
    fired: list[Any] = []
    started: list[bool] = []

    def other_process_first(batch: IngestBatch) -> None:
        if not started:
            started.append(True)
            with second_workspace(ws) as other:
                fired.append(memories.remember(other, admin, FACT, tags={"from": "other"}))
        flush(batch)

    monkeypatch.setattr(IngestBatch, "flush", other_process_first)
    mine = memories.remember(ws, admin, FACT, tags={"from": "me"})
    monkeypatch.undo()
    (theirs,) = fired
    assert theirs.outcome == "created"
    assert (mine.memory_id, mine.outcome) == (theirs.memory_id, "existing")
    assert mine.tags == {"from": ["me", "other"]}
    listed = [m for m in memories.list_memories(ws, admin) if m.content == FACT]
    assert [(m.memory_id, m.revision_number, m.tags) for m in listed] == [
        (mine.memory_id, 1, {"from": ["me", "other"]})
    ]


def remember_while_another_writer_commits(
    ws: Workspace, read: tuple[Any, str], text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remember `text` (tags b=2) while another writer (its own thread and connection, as
    another process) remembers it too (tags a=1), committing right after this call's first
    `read` (an (object, method name) of the store) that finds nothing. Then: theirs created,
    mine 'existing' with both tags, one memory of one revision."""
    admin = ws.local_principal()
    owner, name = read
    original = getattr(owner, name)
    fired: list[Any] = []

    def then_the_other_writer_commits(conn: Any, *args: Any) -> Any:
        found = original(conn, *args)
        if found is None and conn is ws.conn and not fired:

            def other() -> None:
                with second_workspace(ws) as second:
                    fired.append(memories.remember(second, admin, text, tags={"a": "1"}))

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        return found

    monkeypatch.setattr(owner, name, then_the_other_writer_commits)
    mine = memories.remember(ws, admin, text, tags={"b": "2"})
    monkeypatch.undo()
    (theirs,) = fired
    assert theirs.outcome == "created"
    assert (mine.memory_id, mine.outcome, mine.tags) == (
        theirs.memory_id, "existing", {"a": "1", "b": "2"},
    )  # fmt: skip
    listed = [m for m in memories.list_memories(ws, admin) if m.content == text]
    assert [(m.memory_id, m.revision_number, m.tags) for m in listed] == [
        (mine.memory_id, 1, {"a": "1", "b": "2"})
    ]


def test_two_inserts_of_one_new_memory_on_postgres(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both servers find no memory and insert the same one in their write transactions: the
    UNIQUE (knowledge_base_id, path) constraint lets the first in; the second's insert does
    nothing, and it answers as for content stored already. (The other server commits inside
    this one's write transaction, before its insert.)"""
    settings = Settings(db=fresh_postgres_url, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), create=True) as ws:
        memories.remember(ws, ws.local_principal(), QUOKKA)
        remember_while_another_writer_commits(
            ws, (ws.store.catalog, "current_document"),
            "Both servers remember this at the same moment.", monkeypatch,
        )  # fmt: skip


def test_a_memory_written_between_content_check_and_id_choice_is_found(
    backend_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer commits the same new memory after this call found no memory with its
    content and before it picks a free id. The id it would have picked is then taken: read
    apart, the call passed over it and wrote the content again under the next id (seen as
    two 'created' answers of four simultaneous writers on PostgreSQL). One snapshot for both
    reads: one memory, answered 'existing', with both callers' tags."""
    ws = backend_workspace
    memories.remember(ws, ws.local_principal(), QUOKKA)  # the default store exists
    remember_while_another_writer_commits(
        ws, (ws.store.memories, "same_content"), FACT, monkeypatch
    )


def test_writers_remembering_at_once_make_one_memory(backend_workspace: Workspace) -> None:
    ws = backend_workspace
    admin = ws.local_principal()
    memories.remember(ws, admin, QUOKKA)
    text = "Four writers remember this at once."
    results: list[Any] = []
    barrier = threading.Barrier(4)

    def writer(index: int) -> None:
        with second_workspace(ws) as own:
            barrier.wait()
            results.append(outcome(partial(memories.remember, own, admin, text,
                                           tags={f"writer{index}": "yes"})))  # fmt: skip

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.outcome for r in results) == ["created", "existing", "existing", "existing"]
    assert len({r.memory_id for r in results}) == 1
    (stored,) = [m for m in memories.list_memories(ws, admin) if m.content == text]
    assert stored.tags == {f"writer{i}": "yes" for i in range(4)}
    assert stored.revision_number == 1


def test_one_store_name_is_created_once(backend_workspace: Workspace) -> None:
    """Writers creating a store of one name at once: one creates it, the others are told it
    exists (on PostgreSQL they take turns on the tenant's row; the name is checked in turn)."""
    ws = backend_workspace
    admin = ws.local_principal()
    memories.list_memory_stores(ws, admin)  # the local tenant exists
    results: list[Any] = []
    barrier = threading.Barrier(4)

    def creator(index: int) -> None:
        with second_workspace(ws) as own:
            barrier.wait()
            results.append(outcome(partial(memories.create_memory_store, own, admin, "ops",
                                           tags={"by": str(index)})))  # fmt: skip

    threads = [threading.Thread(target=creator, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    created = [r for r in results if not isinstance(r, dict)]
    refused = [r["error"]["message"] for r in results if isinstance(r, dict)]
    assert len(created) == 1 and refused == ["a memory store named 'ops' already exists"] * 3
    assert memories.list_memory_stores(ws, admin) == created
