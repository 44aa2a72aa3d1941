"""Shared by the PostgreSQL tests: a corpus with every kind of row, and the same search run on an
SQLite file and on its PostgreSQL copy.

`pg_response` runs the search engine on the PostgreSQL copy of an SQLite file (ids are equal:
`kbmcp copy` keeps them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from kbmcp.access import Principal
from kbmcp.search.models import SearchFilters, SearchRequest, SearchResponse
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.memories import create_memory_store, forget, remember
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant, share_knowledge_base
from kbmcp.service.tokens import create_token
from kbmcp.workspace import Workspace
from tests.mcp_support import T0, T1, T2, build_corpus, hash_workspace, pinned_clock, write
from tests.ranked_output import stable

ACME_RUNBOOK = """\
# Acme failover runbook

Zanzibar is the codename of the acme failover procedure. Promote the standby, then repoint
the load balancer. The vector index is rebuilt after a failover.

## Rollback

Demote the promoted standby if the zanzibar checks fail; the error budget decides.
"""
ACME_NOTES = """\
---
title: Acme notes
tags: {team: billing}
owner: finance
priority: 2
---
Acme notes: the quokka cluster hosts the billing queue. The error budget of billing is small.
"""
BETA_DOCS = """\
# Beta onboarding

Every beta engineer receives a narwhal badge on the first day. The vector index of beta
holds the onboarding guide; the error budget is reviewed weekly.
"""
MEMORIES = {
    "acme": [
        "Deploys freeze on Fridays; the error budget is reviewed on Mondays.",
        "The zanzibar failover drill runs every quarter.",
        "Billing queue owners: the quokka team.",
    ],
    "local": [
        "The vector index must be rebuilt after changing the embedding model.",
        "Remember to renew the TLS certificate before March.",
    ],
}


def build_rich_corpus(root: Path, db_path: Path, *, view: str = "all") -> None:
    """The MCP corpus (local tenant: two knowledge bases, a revised document, memories) plus
    tenants `acme` and `beta` with their knowledge bases, a share of beta's to acme, a token and
    acme's memories (one forgotten), written at pinned times.

    `view`: "all", or only what one tenant may read, "local" or "acme": in such a file the
    tenant reads every store, so its keyword statistics are the whole file's (FTS5's own). The
    same names give the same public ids in every file built with the test key."""
    if view in ("all", "local"):
        build_corpus(root, db_path)
    files = {
        "acme-ops": ("acme", write(root / "acme-ops", {"failover.md": ACME_RUNBOOK})),
        "acme-notes": ("acme", write(root / "acme-notes", {"notes.md": ACME_NOTES})),
        "beta-docs": ("beta", write(root / "beta-docs", {"onboarding.md": BETA_DOCS})),
    }
    with hash_workspace(db_path) as ws, pinned_clock(T0):
        admin = ws.local_principal()
        if view in ("all", "acme"):
            for tenant in ("acme", "beta"):
                create_tenant(ws, admin, tenant)
            for kb, (owner, folder) in files.items():
                add_paths(ws, act_as_tenant(ws, admin, owner), [folder],
                          IngestOptions(knowledge_base=kb))  # fmt: skip
            share_knowledge_base(ws, admin, "beta-docs", tenant="acme")
            create_token(ws, admin, tenant="acme", scopes=["knowledge:read", "memory:read"])
        for owner, contents in MEMORIES.items():
            if view not in ("all", owner):
                continue
            principal = admin if owner == "local" else act_as_tenant(ws, admin, owner)
            store = None
            for moment, content in zip((T0, T1, T2), contents, strict=False):
                with pinned_clock(moment):
                    if store is None:
                        store = create_memory_store(ws, principal, "journal").memory_store_id
                    remembered = remember(ws, principal, content, memory_store_id=store,
                                          tags={"topic": "ops"})  # fmt: skip
            with pinned_clock(T2):  # a forgotten memory: archived, never searched
                forget(ws, principal, remembered.memory_id)
                remember(ws, principal, contents[0] + " Again.", memory_store_id=store)


def principal_of(ws: Workspace, tenant: str | None) -> Principal:
    admin = ws.local_principal()
    return admin if tenant is None else act_as_tenant(ws, admin, tenant)


@dataclass(frozen=True)
class Hit:
    """A result as both backends must give it (scores rounded as snapshots round them)."""

    chunk_id: str
    score: float
    lexical_rank: int | None
    lexical_score: float | None
    semantic_rank: int | None
    semantic_score: float | None
    recency_weight: float | None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def sqlite_hits(ws: Workspace, principal: Principal, request: SearchRequest) -> list[Hit]:
    response = search(ws, principal, request)
    return [
        Hit(r.chunk_id, _round(r.score), r.lexical_rank, _round(r.lexical_score),
            r.semantic_rank, _round(r.semantic_similarity), _round(r.recency_weight))
        for r in response.results
    ]  # fmt: skip


def pg_response(pg: Workspace, principal: Principal, request: SearchRequest) -> SearchResponse:
    """What `search` answers on the PostgreSQL copy (`pg`) of an SQLite file, for a principal
    of either (`kbmcp copy` keeps row ids)."""
    return search(pg, principal, request)


def pg_hits(pg: Workspace, principal: Principal, request: SearchRequest) -> list[Hit]:
    return [
        Hit(r.chunk_id, _round(r.score), r.lexical_rank, _round(r.lexical_score),
            r.semantic_rank, _round(r.semantic_similarity), _round(r.recency_weight))
        for r in pg_response(pg, principal, request).results
    ]  # fmt: skip


QUERIES = (
    "vector index",  # common in several stores
    '"error budget" billing',  # a quoted phrase
    "zanzibar failover standby",
    "sqlite-vec exact search",  # a hyphenated term: a phrase of two tokens
    "the of and a",  # stop words only
    "quokka",
    "restore the database backup",
    '"on-call engineer" pages within minutes',
    "page",
    "nothing matches xylophone",
)
MODES = ("lexical", "semantic", "hybrid", "rrf")
FILTERS = (
    SearchFilters(),
    SearchFilters(include_memories=False),
    SearchFilters(document_paths=["ops/"]),
    SearchFilters(tags={"topic": "ops"}),
    SearchFilters(metadata={"owner": "infra"}),
)


def every_search(db: Path | str, tenant: str | None) -> list[object]:
    """Every mode x filter x query of the rich corpus as `tenant` (None: the local owner), in
    a comparable form: what must come out the same after a database is moved (`kbmcp copy`,
    export and import)."""
    from kbmcp.config import Settings
    from kbmcp.embed.hashing import HashingEmbedder
    from tests.ranked_output import stable

    ws = Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder())
    try:
        principal = principal_of(ws, tenant)
        found = []
        for mode in MODES:
            for filters in FILTERS:
                for query in QUERIES:
                    request = SearchRequest(query=query, mode=mode, limit=5, filters=filters)
                    found.append(stable(search(ws, principal, request).__dict__ | {"stats": None}))
        return found
    finally:
        ws.close()


# ------------------------------------------------------------------ parity of two databases

# Besides the plain request: the depth that makes pruned terms fall back to every term, the
# similarity floor, memories' recency decay; each with these queries (a phrase, a hyphenated
# term, stop words).
VARIANTS: tuple[dict[str, Any], ...] = (
    {"candidates": 2},
    {"min_similarity": 0.2},
    {"recency_half_life_days": 30.0},
)
VARIANT_QUERIES = ('"error budget" billing', "sqlite-vec exact search", "the of and a")


def scopes_of(ws: Workspace, tenant: str) -> list[SearchFilters]:
    """Every kind of scope for `tenant` of the rich corpus: FILTERS, and its own ids of each
    kind (one and all its knowledge bases, two documents, its memory stores, both kinds with
    a tag)."""
    rows = ws.conn.execute(
        "SELECT kb.kind, kb.public_id, (SELECT array_agg(d.public_id ORDER BY d.id)"
        " FROM document AS d WHERE d.knowledge_base_id = kb.id AND d.status = 'published')"
        " FROM knowledge_base AS kb JOIN tenant AS t ON t.id = kb.tenant_id"
        " WHERE t.name = %s ORDER BY kb.id",
        (tenant,),
    ).fetchall()
    kbs = [public for kind, public, _ in rows if kind == "documents"]
    stores = [public for kind, public, _ in rows if kind == "memories"]
    documents = [doc for kind, _, docs in rows if kind == "documents" for doc in (docs or [])]
    return [
        *FILTERS,
        SearchFilters(include_documents=False),
        SearchFilters(knowledge_base_ids=kbs[:1]),
        SearchFilters(knowledge_base_ids=kbs),
        SearchFilters(document_ids=documents[:2]),
        SearchFilters(memory_store_ids=stores),
        SearchFilters(knowledge_base_ids=kbs, memory_store_ids=stores, tags={"topic": "ops"}),
    ]


def parity_requests(
    ws: Workspace, tenant: str | None, queries: Sequence[str] = QUERIES
) -> Iterator[SearchRequest]:
    """Every mode x every kind of scope (`scopes_of`) x `queries`, and the VARIANTS in the
    scopes that cross kinds and stores (unscoped, memories only, both kinds with a tag)."""
    scopes = scopes_of(ws, tenant or "local")
    crossing = [scopes[0], scopes[len(FILTERS)], scopes[-1]]
    for filters in scopes:
        for mode in MODES:
            cases = [({}, query) for query in queries]
            if filters in crossing:
                cases += [(extra, query) for extra in VARIANTS for query in VARIANT_QUERIES]
            for extra, query in cases:
                yield SearchRequest(query=query, mode=mode, limit=8, filters=filters, **extra)


# The moment parity searches run at: recency decay weighs memories by their age then.
SEARCHED_AT = "2026-02-01T00:00:00Z"


def answer(ws: Workspace, tenant: str | None, request: SearchRequest) -> Any:
    """The whole response as outputs show it (scores to 6 decimals, no timing), or the error
    (two databases must refuse alike), searched at SEARCHED_AT."""
    try:
        with pinned_clock(SEARCHED_AT):
            response = search(ws, principal_of(ws, tenant), request)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return stable(to_jsonable_python(response.__dict__))
