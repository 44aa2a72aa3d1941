"""Document scoping rules (`document_ids` / `knowledge_ids`), one test per rule, on a file with
two tenants: every selected document must exist, be published, be readable (own or shared)
and lie inside `knowledge_base_ids` (its tenant is its knowledge base's owner by construction);
a failing selection is an error naming the failing ids and runs no retrieval; a selected
document is never emptied by `min_similarity`. On both store backends (PostgreSQL: a copy of the
file)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from mcp import Client

from kbmcp.access import Principal
from kbmcp.errors import InvalidRequest, ResourceUnavailable
from kbmcp.search.models import MAX_DOCUMENT_IDS, SearchFilters, SearchRequest, SearchResponse
from kbmcp.server.app import build_server
from kbmcp.service.read import read_document
from kbmcp.service.search import search
from kbmcp.service.tenants import share_knowledge_base, unshare_knowledge_base
from kbmcp.workspace import Workspace
from tests.access_support import build_two_tenants, tenant_of
from tests.mcp_support import hash_workspace, payload
from tests.store_backends import rows, workspace_on


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scoping")
    db_path = root / "kb.db"
    build_two_tenants(root, db_path)
    return db_path


@pytest.fixture(scope="module")
def ws(db: Path, module_backend: str, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    with workspace_on(module_backend, db, request) as workspace:
        yield workspace


def _doc(ws: Workspace, path: str) -> str:
    return rows(ws, "SELECT public_id FROM document WHERE path = ?", path)[0][0]


def _kb(ws: Workspace, name: str) -> str:
    return rows(ws, "SELECT public_id FROM knowledge_base WHERE name = ?", name)[0][0]


def _search(ws: Workspace, principal: Principal, **kwargs: object) -> SearchResponse:
    request = SearchRequest("zanzibar standby narwhal quokka", **kwargs)  # type: ignore[arg-type]
    return search(ws, principal, request)


def _counting_retrievals(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    monkeypatch.setattr("kbmcp.service.search.run_search", lambda *a, **k: calls.append(a))
    return calls


def test_a_selected_document_scopes_the_search_to_it(ws: Workspace) -> None:
    acme = tenant_of(ws, "acme")
    doc = _doc(ws, "failover.md")
    response = _search(ws, acme, filters=SearchFilters(document_ids=[doc]))
    assert response.results and {r.document_id for r in response.results} == {doc}


def test_ids_are_trimmed_and_deduplicated(ws: Workspace) -> None:
    acme = tenant_of(ws, "acme")
    doc = _doc(ws, "failover.md")
    padded = _search(ws, acme, filters=SearchFilters(document_ids=[f" {doc} ", doc]))
    plain = _search(ws, acme, filters=SearchFilters(document_ids=[doc]))
    assert [r.chunk_id for r in padded.results] == [r.chunk_id for r in plain.results]


@pytest.mark.parametrize(
    ("ids", "message"),
    [([], "must not be empty"), (["doc_0123456789abcdef"] * (MAX_DOCUMENT_IDS + 1), "at most")],
)
def test_empty_and_oversized_lists_are_rejected_before_retrieval(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, ids: list[str], message: str
) -> None:
    calls = _counting_retrievals(monkeypatch)
    with pytest.raises(InvalidRequest, match=message) as error:
        _search(ws, tenant_of(ws, "acme"), filters=SearchFilters(document_ids=ids))
    assert error.value.details["argument"] == "document_ids" and calls == []


def test_another_tenants_document_is_unavailable_and_named(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_retrievals(monkeypatch)
    theirs, unknown = _doc(ws, "onboarding.md"), "doc_0123456789abcdef"
    with pytest.raises(ResourceUnavailable) as error:
        _search(ws, tenant_of(ws, "acme"), filters=SearchFilters(document_ids=[theirs, unknown]))
    assert error.value.details["document_ids"] == [theirs, unknown]
    assert calls == []


def test_a_document_of_a_shared_knowledge_base_is_selectable_and_keeps_its_owner(
    ws: Workspace,
) -> None:
    beta = tenant_of(ws, "beta")
    doc = _doc(ws, "failover.md")
    with pytest.raises(ResourceUnavailable):
        _search(ws, beta, filters=SearchFilters(document_ids=[doc]))
    share_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
    try:
        response = _search(ws, beta, filters=SearchFilters(document_ids=[doc]))
    finally:  # the module's other tests read the file as it was built
        unshare_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
    assert response.results and {r.document_id for r in response.results} == {doc}
    [(owner,)] = rows(
        ws,
        "SELECT t.name FROM document AS d "
        "JOIN knowledge_base AS kb ON kb.id = d.knowledge_base_id "
        "JOIN tenant AS t ON t.id = kb.tenant_id WHERE d.public_id = ?",
        doc,
    )
    assert owner == "acme"
    with pytest.raises(ResourceUnavailable):  # revoked
        _search(ws, beta, filters=SearchFilters(document_ids=[doc]))


def test_a_documents_tenant_cannot_disagree_with_its_knowledge_base_owner(tmp_path: Path) -> None:
    """A document's tenant is its knowledge base's owner (migration 8): there is no second copy
    a writer could set differently, so every read path answers the same for it."""
    db_path = tmp_path / "kb.db"
    build_two_tenants(tmp_path, db_path)
    with hash_workspace(db_path) as ws:
        doc = _doc(ws, "failover.md")
        beta_id, kb_id = ws.conn.execute(
            "SELECT (SELECT id FROM tenant WHERE name = 'beta'), knowledge_base_id "
            "FROM document WHERE public_id = ?",
            (doc,),
        ).fetchone()
        disagreeing_writes = [
            ("UPDATE document SET tenant_id = ? WHERE public_id = ?", (beta_id, doc)),
            (
                "INSERT INTO document (public_id, knowledge_base_id, path, title, kind, "
                "tenant_id, created_at, updated_at) "
                "VALUES ('doc_00000000000000ff', ?, 'x.md', 'X', 'markdown', ?, 'x', 'x')",
                (kb_id, beta_id),
            ),
        ]
        for statement, parameters in disagreeing_writes:
            with pytest.raises(apsw.SQLError, match="tenant_id"), ws.conn:
                ws.conn.execute(statement, parameters)
        acme, beta = tenant_of(ws, "acme"), tenant_of(ws, "beta")
        assert read_document(ws, acme, doc).document_id == doc
        selected = _search(ws, acme, filters=SearchFilters(document_ids=[doc]))
        assert {hit.document_id for hit in selected.results} == {doc}
        with pytest.raises(ResourceUnavailable):
            read_document(ws, beta, doc)
        with pytest.raises(ResourceUnavailable):
            _search(ws, beta, filters=SearchFilters(document_ids=[doc]))


def test_a_document_outside_the_selected_knowledge_bases_is_a_conflict(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_retrievals(monkeypatch)
    filters = SearchFilters(
        knowledge_base_ids=[_kb(ws, "acme-notes")], document_ids=[_doc(ws, "failover.md")]
    )
    with pytest.raises(InvalidRequest) as error:
        _search(ws, tenant_of(ws, "acme"), filters=filters)
    assert error.value.details["argument"] == "document_ids" and calls == []


def test_min_similarity_never_empties_a_selected_document(ws: Workspace) -> None:
    acme = tenant_of(ws, "acme")
    doc = _doc(ws, "failover.md")
    unscoped = _search(ws, acme, mode="semantic", min_similarity=0.999)
    assert unscoped.results == []  # the floor removes every vector candidate ...
    selected = _search(
        ws, acme, mode="semantic", min_similarity=0.999, filters=SearchFilters(document_ids=[doc])
    )
    # ... but not those of a document the caller chose.
    assert selected.results and {r.document_id for r in selected.results} == {doc}
    assert all(r.semantic_similarity < 0.999 for r in selected.results)


class _As:
    """A server's caller fixed to one principal (an in-process stand-in for a token)."""

    def __init__(self, principal: Principal) -> None:
        self._principal = principal

    def current(self) -> Principal:
        return self._principal


@pytest.mark.anyio
async def test_a_read_of_a_shared_document_names_its_owner_and_source(tmp_path: Path) -> None:
    """Through MCP: beta reads acme's shared runbook; the read says the text is acme's, from
    which knowledge base and file. beta's own knowledge base in knowledge_base_ids does not
    contain it."""
    db_path = tmp_path / "kb.db"
    build_two_tenants(tmp_path, db_path)
    with hash_workspace(db_path) as ws:
        share_knowledge_base(ws, ws.local_principal(), "acme-ops", tenant="beta")
        doc, acme_ops, beta_docs = (
            _doc(ws, "failover.md"),
            _kb(ws, "acme-ops"),
            _kb(ws, "beta-docs"),
        )
        acme_id = ws.conn.execute("SELECT public_id FROM tenant WHERE name = 'acme'").fetchone()[0]
        async with Client(build_server(ws, principals=_As(tenant_of(ws, "beta")))) as client:
            read = payload(await client.call_tool("search_knowledge", {"document_id": doc}))
            scoped = payload(
                await client.call_tool(
                    "search_knowledge", {"document_id": doc, "knowledge_base_ids": [beta_docs]}
                )
            )
    assert (read["knowledge_base_id"], read["knowledge_base_name"]) == (acme_ops, "acme-ops")
    assert (read["owner_tenant"], read["owner_tenant_id"]) == ("acme", acme_id)
    assert read["source"] == str((tmp_path / "acme-ops" / "failover.md").resolve())
    assert scoped["error"]["code"] == "resource_unavailable"
