"""Memories through MCP: remember, forget, one ranked list with documents, filters, decay.

Every test talks to a real server through the SDK client (in-process for most; stdio and HTTP
with tokens for the transport and tenant tests). KBMCP_NOW pins the clock where ages matter.
The in-process tests run on both backends (`db`: the file, or a PostgreSQL copy of it), and
both must match one snapshot; the stdio, HTTP and CLI tests run on the file (`file_db`).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mcp import Client
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.location import PyTestLocation

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.server.app import build_server
from kbmcp.server.tools import ServerOptions
from kbmcp.service import memories
from kbmcp.service.admin import doctor
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.tenants import create_tenant
from kbmcp.store.copy import copy_store
from kbmcp.workspace import Workspace
from tests.access_support import connect_with_token, make_token
from tests.cli_support import Run
from tests.mcp_support import T0, T1, T2, HttpServer, connect, payload, pinned_clock, write
from tests.postgres_fixtures import create_database, drop_database, module_database
from tests.ranked_output import stable

pytestmark = pytest.mark.anyio

DEPLOY_DOC = """\
---
tags: [runbook]
---
# Deploy runbook

Deploys run from the release pipeline. The deploy key is stored in the vault and every deploy
is announced in the release channel first.
"""
GARDEN_DOC = """\
# Garden notes

The quokka enclosure is watered every morning; quokka feeding happens at noon.
"""
FACT = "The deploy key rotates on the first Monday of each month."
QUOKKA = "Quokka feeding moved to two in the afternoon."


@pytest.fixture(scope="module")
def built_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two documents ingested once per module (pinned clock and id key: every build is the
    same); each test gets a copy of its own."""
    root = tmp_path_factory.mktemp("memories")
    db_path = root / "kb.db"
    folder = write(root / "docs", {"ops/deploy.md": DEPLOY_DOC, "garden/notes.md": GARDEN_DOC})
    with workspace(db_path) as ws, pinned_clock(T0):
        add_paths(ws, ws.local_principal(), [folder], IngestOptions(knowledge_base="handbook"))
    assert not db_path.with_name("kb.db-wal").exists()  # closed whole: the file is a copy
    return db_path


@pytest.fixture
def file_db(built_file: Path, tmp_path: Path) -> Path:
    db_path = tmp_path / "kb.db"
    shutil.copyfile(built_file, db_path)
    return db_path


@pytest.fixture(scope="module")
def built_postgres(built_file: Path, request: pytest.FixtureRequest) -> str:
    """A PostgreSQL copy of `built_file` (ids unchanged), made once per module: each test's
    database is a copy of this one (CREATE DATABASE ... TEMPLATE), not a new `kbmcp copy`."""
    url = module_database(request, "built")
    copy_store(str(built_file), url, force=True)
    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def db(backend: str, request: pytest.FixtureRequest, file_db: Path) -> Iterator[Path | str]:
    """The documents in a file, or in a PostgreSQL copy of it (ids unchanged)."""
    if backend == "sqlite":
        yield file_db
        return
    server = str(request.getfixturevalue("postgres_server_url"))
    template = str(request.getfixturevalue("built_postgres"))
    url = create_database(server, "memories", template=template)
    try:
        yield url
    finally:
        drop_database(server, url)


BACKEND_ID = re.compile(r"\[(sqlite|postgres)\]|(sqlite|postgres)-|-(sqlite|postgres)(?=\])")


class SharedSnapshot(JSONSnapshotExtension):
    """The snapshots of snapshots/test_memories/, one per test for both backends: the backend's
    id is left out of the name, so PostgreSQL's answer must be the file's, byte for byte."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        root = Path(__file__).resolve().parent.parent
        return str(root / "snapshots" / Path(test_location.filepath).stem)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: Any = 0) -> str:
        name = super().get_snapshot_name(test_location=test_location, index=index)
        return BACKEND_ID.sub("", name)


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(SharedSnapshot)


def workspace(db_path: Path | str, half_life: float = 0.0) -> Workspace:
    settings = Settings(db=db_path, embedder="hash", recency_half_life_days=half_life)
    return Workspace(settings, embedder=HashingEmbedder())


@pytest.fixture
async def client(db: Path) -> AsyncIterator[Client]:
    with workspace(db) as ws:
        async with Client(build_server(ws)) as connected:
            yield connected


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    return payload(await client.call_tool(tool, arguments))


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    body = payload(result)
    assert not result.is_error, body
    return body


async def search(client: Client, **arguments: Any) -> list[dict[str, Any]]:
    return (await ok(client, "search_knowledge", **arguments))["results"]


def kinds(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(hit["kind"], hit["document_id"]) for hit in results]


def make_store(db: Path | str, name: str, **tags: str) -> str:
    with workspace(db) as ws:
        store = memories.create_memory_store(ws, ws.local_principal(), name, tags=tags)
    return store.memory_store_id


# ------------------------------------------------------------------ remember and find


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid", "rrf"])
async def test_a_remembered_fact_is_found_in_every_mode(client: Client, mode: str) -> None:
    remembered = await ok(client, "remember", content=FACT, tags={"topic": "deploy"})
    assert remembered["outcome"] == "created" and remembered["memory_id"].startswith("mem_")
    hits = await search(client, query="when does the deploy key rotate", mode=mode)
    memory_hits = [hit for hit in hits if hit["kind"] == "memory"]
    assert [hit["document_id"] for hit in memory_hits] == [remembered["memory_id"]]
    hit = memory_hits[0]
    assert hit["knowledge_base_id"] == remembered["memory_store_id"]
    assert hit["path"] == remembered["memory_id"] == hit["citation"]["path"]
    assert hit["excerpt"] == FACT
    # Documents are in the same list, ranked by the same fusion.
    assert any(hit["kind"] == "document" for hit in hits)


async def test_remember_output_and_dedup(client: Client, snapshot_json: SnapshotAssertion) -> None:
    first = await ok(client, "remember", content=FACT, tags={"topic": "deploy"}, source="chat 7")
    again = await ok(client, "remember", content=f"  {FACT}\n", tags={"team": "ops"})
    assert again["memory_id"] == first["memory_id"]
    assert again["outcome"] == "existing"
    assert again["tags"] == {"team": "ops", "topic": "deploy"}  # new tags are added
    hits = await search(client, query="deploy key rotates", include_documents=False)
    assert len(hits) == 1  # one memory, not two
    assert {"first": first, "again": again} == snapshot_json


async def test_memories_are_chunked_like_documents_and_fetched_by_chunk_id(client: Client) -> None:
    long_fact = "\n\n".join(f"Paragraph {i}: the quokka count was {i * 7}. " * 20 for i in range(8))
    remembered = await ok(client, "remember", content=long_fact)
    hits = await search(client, query="quokka count", include_documents=False, limit=50)
    chunk_ids = [hit["chunk_id"] for hit in hits]
    assert len(chunk_ids) > 1  # a long memory is indexed whole, in several chunks
    fetched = await ok(client, "search_knowledge", chunk_ids=chunk_ids)
    assert {chunk["kind"] for chunk in fetched["chunks"]} == {"memory"}
    assert {chunk["document_id"] for chunk in fetched["chunks"]} == {remembered["memory_id"]}
    text = "".join(chunk["text"] for chunk in sorted(fetched["chunks"], key=_start))
    assert all(chunk["text"] in long_fact for chunk in fetched["chunks"])
    assert len(text) <= len(long_fact)


def _start(chunk: dict[str, Any]) -> int:
    return chunk["citation"]["char_start"]


async def test_a_memory_is_revised_under_the_same_id(db: Path, client: Client) -> None:
    first = await ok(client, "remember", content="The staging database lives in eu-west-1.")
    old_hits = await search(client, query="staging database region", include_documents=False)
    old_chunk = old_hits[0]["chunk_id"]
    revised = await ok(
        client, "remember", content="The staging database moved to eu-central-1.",
        memory_id=first["memory_id"], tags={"topic": "staging"},
    )  # fmt: skip
    assert (revised["memory_id"], revised["outcome"]) == (first["memory_id"], "revised")
    assert revised["revision_id"] != first["revision_id"]
    hits = await search(client, query="staging database", include_documents=False)
    assert [(hit["document_id"], hit["excerpt"]) for hit in hits] == [
        (first["memory_id"], "The staging database moved to eu-central-1.")
    ]
    assert hits[0]["revision_id"] == revised["revision_id"]
    # The old revision stays readable by chunk id (an old citation resolves), marked not current.
    fetched = await ok(client, "search_knowledge", chunk_ids=[old_chunk])
    assert fetched["chunks"][0]["is_current_revision"] is False
    assert "eu-west-1" in fetched["chunks"][0]["text"]
    with workspace(db) as ws:
        (listed,) = memories.list_memories(ws, ws.local_principal())
    assert (listed.revision_number, listed.tags) == (2, {"topic": "staging"})
    # Revising to another memory's text would make a second copy: refused, naming it.
    other = await ok(client, "remember", content=QUOKKA)
    clash = await call(client, "remember", content=QUOKKA, memory_id=first["memory_id"])
    assert clash["error"]["code"] == "invalid_request"
    assert clash["error"]["details"]["memory_id"] == other["memory_id"]


async def test_a_memory_is_read_by_id_like_a_document(client: Client) -> None:
    long_fact = "\n\n".join(f"Step {i}: check the quokka gate, then log it." for i in range(400))
    remembered = await ok(client, "remember", content=long_fact, source="ticket 12")
    memory_id = remembered["memory_id"]
    window = await ok(client, "search_knowledge", document_id=memory_id, limit_chars=5000)
    assert window["request_mode"] == "read" and window["document_id"] == memory_id
    # Where it comes from: the store, its owner and the source given to remember.
    assert (window["knowledge_base_id"], window["knowledge_base_name"]) == (
        remembered["memory_store_id"],
        "memories",
    )
    assert (window["owner_tenant"], window["source"]) == ("local", "ticket 12")
    assert [r["revision_id"] for r in window["revisions"]] == [window["revision_id"]]
    assert window["content"] == long_fact[:5000] and window["next_offset"] == 5000
    rest = await ok(client, "search_knowledge", document_id=memory_id, offset=5000)
    assert window["content"] + rest["content"] == long_fact[:9000]  # 5000 + the default 4000
    await ok(client, "forget", memory_id=memory_id)
    gone = await call(client, "search_knowledge", document_id=memory_id)
    assert gone["error"]["code"] == "resource_unavailable"


# ------------------------------------------------------------------ forget


async def test_forget_takes_a_memory_out_of_search_at_once(client: Client) -> None:
    remembered = await ok(client, "remember", content=QUOKKA)
    memory_id = remembered["memory_id"]
    hits = await search(client, query="quokka feeding afternoon", include_documents=False)
    assert kinds(hits) == [("memory", memory_id)]
    chunk_id = hits[0]["chunk_id"]

    forgotten = await ok(client, "forget", memory_id=memory_id)
    assert forgotten["outcome"] == "forgotten"
    for mode in ("lexical", "semantic", "hybrid", "rrf"):
        hits = await search(client, query="quokka feeding afternoon", mode=mode)
        assert all(hit["kind"] == "document" for hit in hits), mode
    fetched = await ok(client, "search_knowledge", chunk_ids=[chunk_id])
    assert fetched["chunks"] == [] and fetched["missing"] == [chunk_id]
    scanned = await ok(client, "search_knowledge", include_documents=False)
    assert scanned["results"] == []

    assert (await ok(client, "forget", memory_id=memory_id))["outcome"] == "already_forgotten"
    restored = await ok(client, "remember", content=QUOKKA)
    assert (restored["memory_id"], restored["outcome"]) == (memory_id, "restored")
    hits = await search(client, query="quokka feeding afternoon", include_documents=False)
    assert kinds(hits) == [("memory", memory_id)]


async def test_forgotten_memories_are_kept_for_audit(db: Path, client: Client) -> None:
    remembered = await ok(client, "remember", content=QUOKKA)
    await ok(client, "forget", memory_id=remembered["memory_id"])
    with workspace(db) as ws:
        listed = memories.list_memories(ws, ws.local_principal(), include_forgotten=True)
        current = memories.list_memories(ws, ws.local_principal())
    assert [(m.memory_id, m.status, m.content) for m in listed] == [
        (remembered["memory_id"], "forgotten", QUOKKA)
    ]
    assert current == []


async def test_list_memory_stores(
    db: Path, client: Client, snapshot_json: SnapshotAssertion
) -> None:
    assert await ok(client, "list_memory_stores") == {"memory_stores": []}
    ops = make_store(db, "ops", team="ops")
    with pinned_clock(T0):
        await ok(client, "remember", content=FACT)
        await ok(client, "remember", content=QUOKKA, memory_store_id=ops)
        forgotten = await ok(client, "remember", content="Forget me.", memory_store_id=ops)
        await ok(client, "forget", memory_id=forgotten["memory_id"])
    listed = await ok(client, "list_memory_stores")
    counts = {store["name"]: store["memory_count"] for store in listed["memory_stores"]}
    assert counts == {"memories": 1, "ops": 1}  # forgotten memories are not counted
    assert [s["memory_store_id"] for s in listed["memory_stores"] if s["name"] == "ops"] == [ops]
    listed["memory_stores"] = [{**s, "created_at": "…"} for s in listed["memory_stores"]]
    assert listed == snapshot_json
    if isinstance(db, str):
        return  # doctor reports on a file (its PostgreSQL report is not written yet)
    with workspace(db) as ws:
        counts = doctor(ws, ws.local_principal())["counts"]
    assert (counts["memory_stores"], counts["memories"], counts["forgotten_memories"]) == (2, 2, 1)
    assert (counts["knowledge_bases"], counts["documents"]) == (1, 2)  # memories apart


# ------------------------------------------------------------------ one list, filters


async def test_include_flags(client: Client) -> None:
    memory_id = (await ok(client, "remember", content=FACT))["memory_id"]
    query = "deploy key"
    # Lexical scores are not normalised over the candidates, so documents score the same
    # with and without memories beside them.
    both = await search(client, query=query, mode="lexical")
    assert {kind for kind, _ in kinds(both)} == {"document", "memory"}
    only_documents = await search(client, query=query, mode="lexical", include_memories=False)
    assert only_documents == [hit for hit in both if hit["kind"] == "document"]
    only_memories = await search(client, query=query, include_documents=False)
    assert kinds(only_memories) == [("memory", memory_id)]
    scanned = await ok(client, "search_knowledge", include_documents=False)
    assert [(item["kind"], item["document_id"]) for item in scanned["results"]] == [
        ("memory", memory_id)
    ]


async def test_memory_store_and_tag_filters(db: Path, client: Client) -> None:
    ops = make_store(db, "ops", team="ops")
    default = await ok(client, "remember", content=FACT, tags={"topic": "deploy"})
    in_ops = await ok(
        client, "remember", content="The deploy window closes at five.", memory_store_id=ops
    )
    query = "deploy"

    by_store = await search(client, query=query, memory_store_ids=[ops])
    assert kinds(by_store) == [("memory", in_ops["memory_id"])]  # a memory filter: memories only

    # A memory matches a tag by its own tags or its store's, and a pair may come from either.
    own = await search(client, query=query, tags={"topic": "deploy"})
    assert kinds(own) == [("memory", default["memory_id"])]
    from_store = await search(client, query=query, tags={"team": "ops"})
    assert kinds(from_store) == [("memory", in_ops["memory_id"])]
    await ok(client, "remember", content="The deploy window closes at five.", memory_store_id=ops,
             tags={"topic": "deploy"})  # fmt: skip
    mixed = await search(client, query=query, tags={"team": "ops", "topic": "deploy"})
    assert kinds(mixed) == [("memory", in_ops["memory_id"])]
    # The document tag filter still selects documents.
    runbooks = await search(client, query=query, tags={"tag": "runbook"})
    assert {kind for kind, _ in kinds(runbooks)} == {"document"}


# ------------------------------------------------------------------ store-specific filters


async def _documents(client: Client) -> dict[str, tuple[str, str]]:
    """(document id, knowledge base id) by path."""
    page = await ok(client, "list_documents")
    return {d["path"]: (d["document_id"], d["knowledge_base_id"]) for d in page["documents"]}


async def _results(client: Client, query: str | None, **arguments: Any) -> list[dict[str, Any]]:
    """Query mode when `query` is given, scan mode otherwise: both follow the same rules."""
    if query is not None:
        arguments["query"] = query
    return (await ok(client, "search_knowledge", **arguments))["results"]


@pytest.mark.parametrize("query", ["deploy key", None], ids=["query", "scan"])
async def test_a_filter_only_one_store_can_satisfy_chooses_that_store(
    db: Path, client: Client, query: str | None
) -> None:
    """Document filters alone search documents only, memory_store_ids alone memories only; both
    kinds of filter narrow each store by its own; tags fit both stores; the include_* switches
    stay the switches."""
    ops = make_store(db, "ops")
    default = (await ok(client, "remember", content=FACT, tags={"tag": "runbook"}))["memory_id"]
    in_ops = (
        await ok(client, "remember", content="The deploy key is kept in the vault.",
                 memory_store_id=ops)
    )["memory_id"]  # fmt: skip
    docs = await _documents(client)
    deploy, handbook = docs["ops/deploy.md"]
    garden, _ = docs["garden/notes.md"]

    for filters in (
        {"knowledge_ids": [deploy]},
        {"document_ids": [deploy]},
        {"document_paths": ["ops/"]},
        {"knowledge_base_ids": [handbook], "document_paths": ["ops/"]},
    ):
        hits = await _results(client, query, **filters)
        assert kinds(hits) == [("document", deploy)] * len(hits) and hits, filters
    by_kb = await _results(client, query, knowledge_base_ids=[handbook])
    assert {kind for kind, _ in kinds(by_kb)} == {"document"}
    # A memory has no metadata: a metadata filter that matches no document finds nothing.
    response = await ok(client, "search_knowledge", metadata={"owner": "nobody"},
                        **({"query": query} if query else {}))  # fmt: skip
    assert response["results"] == []
    assert response.get("stats", {"filters_unmatched": ["metadata"]})["filters_unmatched"] == [
        "metadata"
    ]

    assert set(kinds(await _results(client, query, memory_store_ids=[ops]))) == {("memory", in_ops)}
    # Both kinds of filter: each store narrowed by its own, both searched.
    both = await _results(client, query, document_ids=[garden], memory_store_ids=[ops])
    assert set(kinds(both)) == {("document", garden), ("memory", in_ops)}
    # tags fit both stores, so alone they search both.
    tagged = await _results(client, query, tags={"tag": "runbook"})
    assert set(kinds(tagged)) == {("document", deploy), ("memory", default)}
    # An explicit switch wins over the choice a filter makes ...
    switched = await _results(client, query, document_ids=[garden], include_memories=True)
    assert set(kinds(switched)) == {("document", garden), ("memory", default), ("memory", in_ops)}
    # ... and a switch that is off is never turned back on by a filter.
    body = await call(client, "search_knowledge", include_memories=False,
                      memory_store_ids=[ops], **({"query": query} if query else {}))  # fmt: skip
    assert body["error"]["code"] == "invalid_request"


async def test_knowledge_ids_at_candidate_depth_one_return_the_document(db: Path) -> None:
    """The bug the document-scoping feature exists to prevent: with one candidate per channel, a
    memory that matches the query better must not take the place of the selected document."""
    with workspace(db) as ws:
        async with Client(build_server(ws, ServerOptions(search_candidates=1))) as client:
            await ok(client, "remember", content=FACT)
            garden, _ = (await _documents(client))["garden/notes.md"]
            for mode in ("hybrid", "lexical", "semantic", "rrf"):
                hits = await search(
                    client, query="when does the deploy key rotate", mode=mode, limit=1,
                    knowledge_ids=[garden],
                )  # fmt: skip
                assert kinds(hits) == [("document", garden)], mode


async def test_min_similarity_spares_the_selected_documents_not_memories(
    db: Path, client: Client
) -> None:
    """The floor's exemption belongs to the selected documents: memories searched beside them
    keep the floor."""
    exact = (await ok(client, "remember", content=FACT))["memory_id"]
    await ok(client, "remember", content=QUOKKA)
    garden, _ = (await _documents(client))["garden/notes.md"]
    floor = 0.999
    hits = await search(
        client, query=FACT, mode="semantic", min_similarity=floor, document_ids=[garden],
        include_memories=True, limit=50,
    )  # fmt: skip
    memories_found = [hit for hit in hits if hit["kind"] == "memory"]
    assert [hit["document_id"] for hit in memories_found] == [exact]  # QUOKKA is below the floor
    documents_found = [hit for hit in hits if hit["kind"] == "document"]
    assert documents_found and {hit["document_id"] for hit in documents_found} == {garden}
    assert all(hit["semantic_similarity"] < floor for hit in documents_found)


# ------------------------------------------------------------------ recency decay


async def test_decay_swaps_two_equal_memories_only_when_on(db: Path) -> None:
    """The same fact in two stores scores exactly the same; the tie goes by chunk id. Making
    the tie's winner the older one, decay (and only decay) puts the newer one first, with the
    exact weights 2^(-age/half_life); documents keep their scores and order."""
    stores = [make_store(db, "north"), make_store(db, "south")]
    with workspace(db) as ws:
        async with Client(build_server(ws)) as client:
            with pinned_clock(T0):
                ids = [
                    (await ok(client, "remember", content=QUOKKA, memory_store_id=store))[
                        "memory_id"
                    ]
                    for store in stores
                ]
            query = {"query": "quokka feeding", "limit": 10}
            with pinned_clock(T1):
                plain = await search(client, **query)
            winner, loser = [hit["document_id"] for hit in plain if hit["kind"] == "memory"]
            assert sorted([winner, loser]) == sorted(ids)
            # The tie's loser is refreshed: forgotten and remembered again at T2 (one day
            # later); the winner stays at T0.
            with pinned_clock(T2):
                await ok(client, "forget", memory_id=loser)
                await ok(
                    client, "remember", content=QUOKKA,
                    memory_store_id=stores[ids.index(loser)],
                )  # fmt: skip
                off = await search(client, **query)
                zero = await search(client, **query, recency_half_life_days=0)
                on = await search(client, **query, recency_half_life_days=1)
                fraction = await search(client, **query, recency_half_life_days=0.5)

    def memory_order(hits: list[dict[str, Any]]) -> list[str]:
        return [hit["document_id"] for hit in hits if hit["kind"] == "memory"]

    def documents(hits: list[dict[str, Any]]) -> list[tuple[str, float]]:
        return [(hit["chunk_id"], hit["score"]) for hit in hits if hit["kind"] == "document"]

    assert memory_order(off) == memory_order(zero) == [winner, loser]
    assert memory_order(on) == memory_order(fraction) == [loser, winner]
    weights = {hit["document_id"]: hit["recency_weight"] for hit in on if hit["kind"] == "memory"}
    assert weights == {loser: 1.0, winner: 0.5**2}  # ages 0 and 2 days, half-life 1 day
    halves = {h["document_id"]: h["recency_weight"] for h in fraction if h["kind"] == "memory"}
    assert halves[winner] == pytest.approx(0.5**4)
    scores = {hit["document_id"]: hit["score"] for hit in off if hit["kind"] == "memory"}
    decayed = {hit["document_id"]: hit["score"] for hit in on if hit["kind"] == "memory"}
    assert decayed[winner] == pytest.approx(scores[winner] * 0.25)
    assert all(hit["recency_weight"] is None for hit in off + zero)
    assert documents(on) == documents(off) == documents(zero) == documents(fraction)
    assert documents(off), "the query must reach documents too"


async def test_decay_default_comes_from_the_setting(db: Path) -> None:
    with pinned_clock(T0), workspace(db) as ws:
        memories.remember(ws, ws.local_principal(), QUOKKA)
    with pinned_clock(T2), workspace(db, half_life=2.0) as ws:
        async with Client(build_server(ws)) as client:
            hits = await search(client, query="quokka feeding", include_documents=False)
            overridden = await search(
                client, query="quokka feeding", include_documents=False, recency_half_life_days=0
            )
    assert hits[0]["recency_weight"] == pytest.approx(0.5)  # two days, half-life two days
    assert overridden[0]["recency_weight"] is None


# ------------------------------------------------------------------ errors


ERRORS = {
    "empty_content": ("remember", {"content": "  "}),
    "content_not_text": ("remember", {"content": 42}),
    "unknown_store": ("remember", {"content": FACT, "memory_store_id": "mst_0000000000000000"}),
    "store_by_name": ("remember", {"content": FACT, "memory_store_id": "memories"}),
    "bad_tags": ("remember", {"content": FACT, "tags": {"topic": 3}}),
    "forget_unknown": ("forget", {"memory_id": "mem_0000000000000000"}),
    "forget_malformed": ("forget", {"memory_id": "doc_0000000000000000"}),
    "forget_nothing": ("forget", {}),
    "revise_unknown": ("remember", {"content": FACT, "memory_id": "mem_0000000000000000"}),
    "revise_with_store": (
        "remember",
        {
            "content": FACT,
            "memory_id": "mem_0000000000000000",
            "memory_store_id": "mst_0000000000000000",
        },
    ),
    "both_kinds_off": (
        "search_knowledge",
        {"query": "deploy", "include_documents": False, "include_memories": False},
    ),
    "filter_of_excluded_kind": (
        "search_knowledge",
        {
            "query": "deploy",
            "include_memories": False,
            "memory_store_ids": ["mst_0000000000000000"],
        },
    ),
    "unknown_store_filter": (
        "search_knowledge",
        {"query": "deploy", "memory_store_ids": ["mst_0000000000000000"]},
    ),
    "negative_half_life": ("search_knowledge", {"query": "deploy", "recency_half_life_days": -1}),
    "half_life_in_scan": ("search_knowledge", {"recency_half_life_days": 1}),
    "include_not_bool": ("search_knowledge", {"query": "deploy", "include_memories": "yes"}),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
async def test_errors(client: Client, case: str, snapshot_json: SnapshotAssertion) -> None:
    tool, arguments = ERRORS[case]
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    body = payload(result)
    assert body["error"]["details"].get("argument") or body["error"]["code"] != "invalid_request"
    assert body == snapshot_json


async def test_a_failed_remember_writes_nothing(db: Path, client: Client) -> None:
    for tool, arguments in ERRORS.values():
        if tool == "remember":
            await client.call_tool(tool, arguments)
    with workspace(db) as ws:
        assert memories.list_memories(ws, ws.local_principal(), include_forgotten=True) == []
        assert memories.list_memory_stores(ws, ws.local_principal()) == []


# ------------------------------------------------------------------ output snapshot


async def test_query_output_with_memories(client: Client, snapshot_json: SnapshotAssertion) -> None:
    with pinned_clock(T0):
        await ok(client, "remember", content=FACT, tags={"topic": "deploy"})
    with pinned_clock(T1):
        result = await ok(
            client, "search_knowledge", query="deploy key", limit=3, recency_half_life_days=1
        )
    assert [hit["kind"] for hit in result["results"]].count("memory") == 1
    assert stable(result) == snapshot_json


# ------------------------------------------------------------------ transports and tenants


async def test_remember_and_forget_over_stdio(file_db: Path) -> None:
    async with connect("stdio", file_db) as client:
        memory_id = (await ok(client, "remember", content=FACT))["memory_id"]
        hits = await search(client, query="deploy key rotates", include_documents=False)
        assert kinds(hits) == [("memory", memory_id)]
        await ok(client, "forget", memory_id=memory_id)
        assert await search(client, query="deploy key rotates", include_documents=False) == []


@pytest.fixture(scope="module")
def tenants_server(
    built_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    """One HTTP server for the module's token tests, on a copy of the file of its own with
    tenants acme and beta (every scope) and carol (a reader's and a write-only token): each
    test uses tenants no other test touches, so they share the server (starting one costs
    more than either test)."""
    db = tmp_path_factory.mktemp("tenants") / "kb.db"
    shutil.copyfile(built_file, db)
    with workspace(db) as ws:
        for name in ("acme", "beta", "carol"):
            create_tenant(ws, ws.local_principal(), name)
    scopes = ["knowledge:read", "memory:read", "memory:write"]
    secrets = {name: make_token(db, name, scopes)[1] for name in ("acme", "beta")}
    secrets["carol"] = make_token(db, "carol", ["memory:read", "memory:write"])[1]
    secrets["carol-write-only"] = make_token(db, "carol", ["memory:write"])[1]
    server = HttpServer(db)
    try:
        yield server.url, secrets
    finally:
        server.stop()


async def test_memories_are_private_to_their_tenant(
    tenants_server: tuple[str, dict[str, str]],
) -> None:
    url, secrets = tenants_server
    async with connect_with_token(url, secrets["acme"]) as acme:
        mine = await ok(acme, "remember", content=FACT)
        hits = await search(acme, query="deploy key rotates", include_documents=False)
        chunk_id = hits[0]["chunk_id"]
        assert kinds(hits) == [("memory", mine["memory_id"])]
    async with connect_with_token(url, secrets["beta"]) as beta:
        assert await search(beta, query="deploy key rotates") == []
        scanned = await ok(beta, "search_knowledge")
        assert scanned["results"] == []
        fetched = await ok(beta, "search_knowledge", chunk_ids=[chunk_id])
        assert fetched["missing"] == [chunk_id]
        for tool, arguments in (
            ("forget", {"memory_id": mine["memory_id"]}),
            ("search_knowledge", {"document_id": mine["memory_id"]}),
            ("remember", {"content": "x", "memory_store_id": mine["memory_store_id"]}),
            (
                "search_knowledge",
                {"query": "deploy", "memory_store_ids": [mine["memory_store_id"]]},
            ),
        ):
            body = await call(beta, tool, **arguments)
            assert body["error"]["code"] == "resource_unavailable", (tool, body)
        # Beta's own memory of the same text is a different memory in beta's own store.
        theirs = await ok(beta, "remember", content=FACT)
        assert theirs["memory_id"] != mine["memory_id"]
        assert theirs["memory_store_id"] != mine["memory_store_id"]
    async with connect_with_token(url, secrets["acme"]) as acme:
        hits = await search(acme, query="deploy key rotates", include_documents=False)
        assert kinds(hits) == [("memory", mine["memory_id"])]


async def test_remember_takes_a_store_id_as_its_schema_says(db: Path, client: Client) -> None:
    """memory_store_id is an id (mst_...), never a name: a name, even of an existing store, is
    invalid_request naming the argument (the CLI's --store resolves names itself)."""
    ops = make_store(db, "ops")
    await ok(client, "remember", content=QUOKKA)  # the default store 'memories' exists now
    for name in ("ops", "memories"):
        body = await call(client, "remember", content=FACT, memory_store_id=name)
        assert body["error"]["code"] == "invalid_request", body
        assert body["error"]["details"]["argument"] == "memory_store_id"
    stored = await ok(client, "remember", content=FACT, memory_store_id=ops)
    assert (stored["memory_store"], stored["outcome"]) == ("ops", "created")


async def test_a_write_only_token_learns_nothing_of_what_is_stored(
    tenants_server: tuple[str, dict[str, str]],
) -> None:
    """`remember` with memory:write but not memory:read answers the same shape whether the
    content was new, stored already (with tags of its own) or forgotten, with only the tags it
    sent: over HTTP, through the SDK client, with real tokens (tenant carol's)."""
    url, secrets = tenants_server
    full, writer = secrets["carol"], secrets["carol-write-only"]
    async with connect_with_token(url, full) as reader:
        await ok(reader, "remember", content=FACT, tags={"private": "yes"}, source="chat 7")
        gone = await ok(reader, "remember", content=QUOKKA)
        await ok(reader, "forget", memory_id=gone["memory_id"])
    async with connect_with_token(url, writer) as blind:
        answers = {
            label: await ok(blind, "remember", content=content, tags={"topic": "x"})
            for label, content in (
                ("new", "The build cache is cleared every Sunday."),
                ("stored already", FACT),
                ("forgotten", QUOKKA),
            )
        }
        mine = answers["new"]["memory_id"]
        revised = await ok(blind, "remember", content=FACT, memory_id=mine, tags={"topic": "x"})
    async with connect_with_token(url, full) as reader:
        listed = await ok(reader, "search_knowledge", include_documents=False)
        again = await ok(reader, "remember", content=FACT)
    for answer in answers.values():
        assert answer["outcome"] == "stored"
        assert answer["tags"] == {"topic": "x"}  # never the stored memory's own tags
        assert answer["memory_store"] == "memories"
    shapes = {
        label: {
            key: value for key, value in answer.items() if key not in ("memory_id", "revision_id")
        }
        for label, answer in answers.items()
    }
    assert shapes["new"] == shapes["stored already"] == shapes["forgotten"]
    # The writes happened all the same: tags added, the forgotten memory back, nothing doubled.
    assert len(listed["results"]) == 3
    assert again["outcome"] == "existing" and again["tags"] == {"private": "yes", "topic": "x"}
    # Revising into text another memory holds is answered like any revision (a refusal told
    # the writer what the store held), and names no other memory.
    shape = {key: value for key, value in revised.items() if key != "revision_id"}
    assert shape == {**shapes["new"], "memory_id": mine}
    assert again["memory_id"] not in str(revised)


# ------------------------------------------------------------------ CLI


def test_cli_memory_commands(kbmcp: Any, tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    created: Run = kbmcp("--db", db, "memory", "store", "create", "ops", "--tag", "team=ops")
    assert created.code == 0, created.err
    assert created.code == 0 and "created memory store ops (mst_" in created.out
    added = kbmcp("--db", db, "remember", FACT, "--store", "ops", "--tag", "topic=deploy", "--json")
    memory_id = __import__("json").loads(added.out)["memory_id"]
    again = kbmcp("--db", db, "remember", FACT, "--store", "ops")
    assert again.out.startswith(f"existing {memory_id} in ops")
    listed = kbmcp("--db", db, "memory", "list")
    assert memory_id in listed.out and "[topic=deploy]" in listed.out
    found = kbmcp("--db", db, "search", "deploy key rotates", "--only", "memories")
    assert found.code == 0 and memory_id in found.out and "memory" in found.out
    stores = kbmcp("--db", db, "memory", "store", "list")
    assert "ops  1 memory  tags team=ops" in stores.out
    fixed = kbmcp("--db", db, "remember", "The deploy key rotates weekly.", "--replace", memory_id)
    assert fixed.out.startswith(f"revised {memory_id} in ops")
    assert "rotates weekly" in kbmcp("--db", db, "memory", "list").out
    gone = kbmcp("--db", db, "forget", memory_id)
    assert gone.out.startswith(f"forgotten {memory_id}")
    assert memory_id not in kbmcp("--db", db, "memory", "list").out
    assert "[forgotten]" in kbmcp("--db", db, "memory", "list", "--all").out
    taken = kbmcp("--db", db, "kb", "create", "ops")
    assert taken.code == 1 and "memory store" in taken.err
    reserved = kbmcp("--db", db, "memory", "store", "create", "default")
    assert reserved.code == 1 and "reserved" in reserved.err


# ------------------------------------------------------------------ the default model


async def test_the_default_model_finds_a_paraphrased_memory(tmp_path: Path) -> None:
    """With the real default model (MiniLM), a memory is found by meaning: the query shares no
    content word with it, and two unrelated memories are beside it."""
    settings = Settings(db=tmp_path / "minilm.db", embedder="minilm")
    with Workspace(settings) as ws:
        async with Client(build_server(ws)) as client:
            fact = await ok(client, "remember", content=FACT)
            for other in (QUOKKA, "The office coffee machine is descaled on Fridays."):
                await ok(client, "remember", content=other)
            hits = await search(
                client, query="how often is the release credential changed", mode="semantic"
            )
    assert hits[0]["document_id"] == fact["memory_id"]
    assert hits[0]["semantic_similarity"] > hits[1]["semantic_similarity"]
