"""Property: no entry point ever returns content from outside the principal's readable set.

Hypothesis draws a state of shares among three tenants, a principal (a tenant, its scopes' read
part, an optional knowledge-base allow-list that may name anything, readable or not) and a
request against one entry point with random filters. The expected readable set is computed here
independently of kbmcp/access.py: with knowledge:read, own knowledge bases + shares in force,
intersected with the allow-list; with memory:read, the tenant's own memory store (every tenant
has one, holding a memory that matches the query; memory stores are never shared and the
allow-list does not limit them). Both search paths run (a long-lived workspace with its caches,
a one-shot one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Principal
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import KbError
from kbmcp.search.models import MODES, SearchFilters, SearchRequest
from kbmcp.service import listing, memories, read, scan
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.search import search
from kbmcp.service.tenants import (
    act_as_tenant,
    create_tenant,
    share_knowledge_base,
    unshare_knowledge_base,
)
from kbmcp.workspace import Workspace
from tests.access_support import names_of
from tests.mcp_support import write

TENANTS = ["t0", "t1", "t2"]
OWNERS = {"a": "t0", "b": "t0", "c": "t1", "d": "t2", "e": "t2"}  # knowledge base -> owner
QUERY = "shared harbour lantern"


@dataclass
class World:
    long_lived: Workspace
    one_shot: Workspace
    tenant_ids: dict[str, tuple[int, str]]  # name -> (row id, public id)
    kb_ids: dict[str, str]  # name -> kb_ id
    kb_of_document: dict[str, str]  # doc_ id -> knowledge base name
    kb_of_chunk: dict[str, str]  # chk_ id -> knowledge base name

    def kb_names(self, kb_ids: set[str]) -> set[str]:
        return names_of(self.kb_ids, kb_ids)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("property")
    db = root / "kb.db"
    settings_ = Settings(db=db, embedder="hash")
    ws = Workspace(settings_, embedder=HashingEmbedder(), long_lived=True)
    admin = ws.local_principal()
    for tenant in TENANTS:
        create_tenant(ws, admin, tenant)
    for kb, owner in OWNERS.items():
        folder = write(
            root / kb,
            {
                f"{kb}/one.md": f"# {kb} one\n\nThe shared harbour lantern of {kb}, first.\n",
                f"{kb}/two.md": f"# {kb} two\n\nA shared lantern by the harbour in {kb}.\n",
            },
        )
        add_paths(ws, act_as_tenant(ws, admin, owner), [folder], IngestOptions(knowledge_base=kb))
    for tenant in TENANTS:
        memories.remember(
            ws, act_as_tenant(ws, admin, tenant), f"The shared harbour lantern kept by {tenant}."
        )
    # Memory stores are named "mem-<tenant>" here (each tenant's is called "memories").
    rows = ws.conn.execute(
        """SELECT CASE kb.kind WHEN 'memories' THEN 'mem-' || t.name ELSE kb.name END,
                  kb.public_id, d.public_id, c.public_id
           FROM knowledge_base AS kb
           JOIN tenant AS t ON t.id = kb.tenant_id
           JOIN document AS d ON d.knowledge_base_id = kb.id
           JOIN chunk AS c ON c.revision_id = d.current_revision_id"""
    ).fetchall()
    tenant_ids = {
        name: (row_id, public_id)
        for row_id, public_id, name in ws.conn.execute("SELECT id, public_id, name FROM tenant")
    }
    one_shot = Workspace(settings_, embedder=HashingEmbedder(), long_lived=False)
    try:
        yield World(
            ws,
            one_shot,
            tenant_ids,
            {kb: kb_id for kb, kb_id, _, _ in rows},
            {doc: kb for kb, _, doc, _ in rows},
            {chunk: kb for kb, _, _, chunk in rows},
        )
    finally:
        one_shot.close()
        ws.close()


GRANTS = [(kb, tenant) for kb, owner in OWNERS.items() for tenant in TENANTS if tenant != owner]
KBS = sorted(OWNERS)


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    return {
        "shares": draw(st.sets(st.sampled_from(GRANTS))),
        "tenant": draw(st.sampled_from(TENANTS)),
        "allow": draw(st.none() | st.sets(st.sampled_from(KBS))),
        # Mostly document readers; some memory readers, some both, some neither.
        "scopes": draw(
            st.sampled_from(
                [
                    {KNOWLEDGE_READ},
                    {KNOWLEDGE_READ},
                    {KNOWLEDGE_READ, MEMORY_READ},
                    {MEMORY_READ},
                    set(),
                ]
            )
        ),
        "entry": draw(
            st.sampled_from(
                ["query", "scan", "read", "outline", "fetch", "list_kbs", "list_documents"]
            )
        ),
        "mode": draw(st.sampled_from(MODES)),
        "kb_filter": draw(st.none() | st.lists(st.sampled_from(KBS), min_size=1, max_size=3)),
        "doc_pick": draw(st.lists(st.integers(0, 9), min_size=1, max_size=4)),
        "one_shot": draw(st.booleans()),
    }


def expected_readable(scenario: dict) -> set[str]:
    """Knowledge bases the principal can read (with knowledge:read)."""
    if KNOWLEDGE_READ not in scenario["scopes"]:
        return set()
    tenant = scenario["tenant"]
    readable = {kb for kb, owner in OWNERS.items() if owner == tenant}
    readable |= {kb for kb, grantee in scenario["shares"] if grantee == tenant}
    if scenario["allow"] is not None:
        readable &= scenario["allow"]
    return readable


def apply_shares(world: World, shares: set[tuple[str, str]]) -> None:
    ws, admin = world.long_lived, world.long_lived.local_principal()
    for kb, tenant in GRANTS:
        change = share_knowledge_base if (kb, tenant) in shares else unshare_knowledge_base
        change(ws, admin, kb, tenant=tenant)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_no_result_comes_from_outside_the_readable_set(world: World, scenario: dict) -> None:
    apply_shares(world, scenario["shares"])
    row_id, public_id = world.tenant_ids[scenario["tenant"]]
    allow = scenario["allow"]
    scopes = frozenset(scenario["scopes"])
    principal = Principal(
        row_id,
        public_id,
        scopes=scopes,
        knowledge_base_allowlist=None
        if allow is None
        else frozenset(world.kb_ids[k] for k in allow),
    )
    readable = expected_readable(scenario)
    own_memories = {f"mem-{scenario['tenant']}"} if MEMORY_READ in scopes else set()
    ws = world.one_shot if scenario["one_shot"] else world.long_lived
    documents = sorted(d for d in world.kb_of_document if d.startswith("doc_"))
    picked_docs = [documents[i] for i in scenario["doc_pick"]]
    kb_filter = scenario["kb_filter"]
    filters = SearchFilters(
        knowledge_base_ids=None if kb_filter is None else [world.kb_ids[k] for k in kb_filter]
    )
    entry = scenario["entry"]

    reached: set[str]
    try:
        if entry == "query":
            response = search(
                ws,
                principal,
                SearchRequest(QUERY, mode=scenario["mode"], limit=100, filters=filters),
            )
            reached = world.kb_names({r.knowledge_base_id for r in response.results})
        elif entry == "scan":
            response = scan.scan_recent(ws, principal, limit=100, filters=filters)
            reached = world.kb_names({r.knowledge_base_id for r in response.results})
        elif entry in ("read", "outline"):
            reached = set()
            for doc in picked_docs:
                try:
                    if entry == "read":
                        read.read_document(ws, principal, doc)
                    else:
                        read.document_outline(ws, principal, doc)
                except KbError as error:
                    if error.code == "forbidden":
                        raise
                    assert error.code == "resource_unavailable"
                    assert world.kb_of_document[doc] not in readable
                    continue
                reached.add(world.kb_of_document[doc])
        elif entry == "fetch":
            chunks = sorted(world.kb_of_chunk)
            fetched = read.fetch_chunks(ws, principal, chunks)
            reached = world.kb_names({c.knowledge_base_id for c in fetched.chunks})
            assert {world.kb_of_chunk[c] for c in fetched.missing} <= set(world.kb_ids) - reached
        elif entry == "list_kbs":
            reached = world.kb_names(
                {kb.knowledge_base_id for kb in listing.list_knowledge_bases(ws, principal)}
            )
        else:
            page = listing.list_documents(
                ws, principal, knowledge_base_ids=filters.knowledge_base_ids, limit=200
            )
            reached = world.kb_names({d.knowledge_base_id for d in page.documents})
    except KbError as error:
        # Refusals are allowed only for a reason: no read scope for what was asked (document
        # entry points and knowledge-base filters need knowledge:read), or a filter naming a
        # knowledge base outside the readable set.
        documents_only = entry in ("read", "outline", "list_kbs", "list_documents")
        if error.code == "forbidden":
            assert KNOWLEDGE_READ not in scopes and (
                documents_only or kb_filter is not None or not scopes
            ), error
        else:
            assert error.code == "resource_unavailable", error
            assert kb_filter is not None and not set(kb_filter) <= readable
        return

    assert scopes, "a principal without a read scope got an answer"
    # Only query, scan and fetch cover memories; the other entry points list documents.
    memory_part = own_memories if entry in ("query", "scan", "fetch") else set()
    visible = readable | memory_part
    assert reached <= visible, f"{entry} leaked {sorted(reached - visible)}"
    # A knowledge-base filter is a document filter: it chooses the documents, so memories are
    # searched only without it (docs/tools.md, store-specific filters).
    within = readable | memory_part if kb_filter is None else readable & set(kb_filter)
    if entry in ("query", "scan", "fetch", "list_kbs") or (
        entry == "list_documents" and kb_filter is None
    ):
        # Complete, too: every readable knowledge base and memory store (inside the filter) is
        # reached.
        assert reached == (visible if entry in ("fetch", "list_kbs") else within)
