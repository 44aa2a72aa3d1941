"""Filters, their combination, validation errors, and explainable empty results, on both
store backends."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from kbmcp.access import KNOWLEDGE_READ
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import Forbidden, InvalidRequest, QueryRequired, ResourceUnavailable
from kbmcp.search.models import MAX_LIMIT, SearchFilters, SearchRequest
from kbmcp.service.ingest import archive_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.mcp_support import hash_workspace
from tests.search_corpus import ingest, write_small_corpus
from tests.store_backends import rows, workspace_on


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two knowledge bases in an SQLite file."""
    root = tmp_path_factory.mktemp("filters")
    with hash_workspace(root / "kb.db") as built:
        ingest(built, write_small_corpus(root), kb="handbook")
        other = root / "other"
        other.mkdir()
        (other / "misc.md").write_text("# Misc\n\nKeys to the office are at the front desk.\n")
        ingest(built, other, kb="office")
    return root / "kb.db"


@pytest.fixture(scope="module")
def ws(corpus: Path, module_backend: str, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    """The corpus on each backend, as a server holds it."""
    with workspace_on(module_backend, corpus, request, long_lived=True) as workspace:
        yield workspace


@pytest.fixture
def writable(corpus: Path, tmp_path: Path) -> Iterator[Workspace]:
    """A copy of the corpus file for a test that changes it (archiving is the ingest
    service's, which writes to SQLite files)."""
    shutil.copy(corpus, tmp_path / "kb.db")
    settings = Settings(db=tmp_path / "kb.db", embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as workspace:
        yield workspace


def _run(ws: Workspace, query: str = "keys", **kwargs: object) -> list[str]:
    filters = SearchFilters(**kwargs)  # type: ignore[arg-type]
    response = search(ws, ws.local_principal(), SearchRequest(query, filters=filters, limit=50))
    return sorted({r.path for r in response.results})


def _ids(ws: Workspace, sql: str, *args: object) -> list[str]:
    return [row[0] for row in rows(ws, sql, *args)]


def _doc(ws: Workspace, path: str) -> str:
    return _ids(ws, "SELECT public_id FROM document WHERE path = ?", path)[0]


def _kb(ws: Workspace, name: str) -> str:
    return _ids(ws, "SELECT public_id FROM knowledge_base WHERE name = ?", name)[0]


def test_unfiltered_search_sees_every_knowledge_base(ws: Workspace) -> None:
    assert "misc.md" in _run(ws) and "handbook/keys.md" in _run(ws)


def test_knowledge_base_filter(ws: Workspace) -> None:
    assert _run(ws, knowledge_base_ids=[_kb(ws, "office")]) == ["misc.md"]


def test_document_filter(ws: Workspace) -> None:
    assert _run(ws, document_ids=[_doc(ws, "guide/cpp.txt")]) == ["guide/cpp.txt"]


def test_path_prefix_filter_is_a_literal_prefix(ws: Workspace) -> None:
    assert _run(ws, document_paths=["handbook/"]) == ["handbook/backups.md", "handbook/keys.md"]
    assert _run(ws, document_paths=["guide/s", "misc"]) == ["guide/search.md", "misc.md"]
    assert _run(ws, document_paths=["handbook/%"]) == []


def test_tag_filter_needs_every_pair(ws: Workspace) -> None:
    assert _run(ws, tags={"team": "security"}) == ["handbook/keys.md"]
    assert _run(ws, tags={"team": "security", "other": "x"}) == []


def test_metadata_filter_is_typed_and_lenient_for_strings(ws: Workspace) -> None:
    assert _run(ws, metadata={"audience": "ops"}) == ["handbook/backups.md", "handbook/keys.md"]
    assert _run(ws, metadata={"version": 2}) == ["handbook/keys.md"]
    assert _run(ws, metadata={"version": 2.0}) == ["handbook/keys.md"]
    assert _run(ws, metadata={"version": "2"}) == ["handbook/keys.md"]  # as typed on the CLI
    assert _run(ws, metadata={"draft": True}) == ["guide/search.md"]
    assert _run(ws, metadata={"draft": "true"}) == ["guide/search.md"]
    assert _run(ws, metadata={"draft": 1}) == []  # a number never equals a boolean
    assert _run(ws, metadata={"version": True}) == []


def test_filters_combine_with_and(ws: Workspace) -> None:
    assert _run(
        ws,
        knowledge_base_ids=[_kb(ws, "handbook")],
        document_paths=["handbook/"],
        metadata={"audience": "ops"},
        tags={"team": "ops"},
    ) == ["handbook/backups.md"]


def test_empty_scope_names_the_filters_that_matched_nothing(ws: Workspace) -> None:
    request = SearchRequest(
        "keys",
        filters=SearchFilters(
            document_paths=["nowhere/"], tags={"team": "security"}, metadata={"x": "y"}
        ),
    )
    response = search(ws, ws.local_principal(), request)
    assert response.results == []
    assert response.stats.scope_chunks == 0
    assert response.stats.filters_unmatched == ["document_paths", "metadata"]


def test_empty_combination_names_every_filter(ws: Workspace) -> None:
    request = SearchRequest(
        "keys", filters=SearchFilters(document_paths=["guide/"], tags={"team": "security"})
    )
    response = search(ws, ws.local_principal(), request)
    assert response.results == []
    assert response.stats.filters_unmatched == ["document_paths", "tags"]


def test_archived_documents_are_not_searchable_nor_selectable(writable: Workspace) -> None:
    ws = writable
    doc_id = _doc(ws, "misc.md")
    archive_document(ws, ws.local_principal(), doc_id)
    assert "misc.md" not in _run(ws)
    with pytest.raises(ResourceUnavailable):
        _run(ws, document_ids=[doc_id])
    with pytest.raises(ResourceUnavailable):  # archiving needs a published document
        archive_document(ws, ws.local_principal(), doc_id)


def test_archiving_needs_the_write_scope(writable: Workspace) -> None:
    ws = writable
    reader = replace(ws.local_principal(), scopes=frozenset({KNOWLEDGE_READ}))
    with pytest.raises(Forbidden):
        archive_document(ws, reader, _doc(ws, "misc.md"))
    assert "misc.md" in _run(ws)


def test_unknown_ids_are_unavailable_and_named_in_one_error(ws: Workspace) -> None:
    missing_doc, missing_kb = "doc_0000000000000000", "kb_0000000000000000"
    with pytest.raises(ResourceUnavailable) as error:
        _run(ws, knowledge_base_ids=[missing_kb], document_ids=[missing_doc])
    assert error.value.details == {
        "argument": "knowledge_base_ids",
        "knowledge_base_ids": [missing_kb],
        "document_ids": [missing_doc],
    }


def test_document_outside_the_selected_knowledge_bases_is_a_conflict(ws: Workspace) -> None:
    with pytest.raises(InvalidRequest) as error:
        _run(ws, knowledge_base_ids=[_kb(ws, "office")], document_ids=[_doc(ws, "guide/cpp.txt")])
    assert error.value.details["argument"] == "document_ids"


def test_id_lists_are_trimmed_and_deduplicated(ws: Workspace) -> None:
    doc = _doc(ws, "guide/cpp.txt")
    assert _run(ws, document_ids=[f" {doc} ", doc]) == ["guide/cpp.txt"]


@pytest.mark.parametrize(
    ("filters", "argument"),
    [
        ({"document_ids": ["doc_nothex"]}, "document_ids"),
        ({"document_ids": ["kb_0000000000000000"]}, "document_ids"),
        ({"document_ids": []}, "document_ids"),
        ({"document_ids": [f"doc_{i:016x}" for i in range(101)]}, "document_ids"),
        ({"knowledge_base_ids": ["nope"]}, "knowledge_base_ids"),
        ({"knowledge_base_ids": "kb_0000000000000000"}, "knowledge_base_ids"),
        ({"document_paths": []}, "document_paths"),
        ({"document_paths": ["  "]}, "document_paths"),
        ({"tags": {}}, "tags"),
        ({"tags": {"team": 3}}, "tags"),
        ({"metadata": {"k": [1, 2]}}, "metadata"),
        ({"metadata": {"": "x"}}, "metadata"),
    ],
)
def test_malformed_filters_name_the_argument(
    ws: Workspace, filters: dict[str, object], argument: str
) -> None:
    with pytest.raises(InvalidRequest) as error:
        _run(ws, **filters)
    assert error.value.details["argument"] == argument


class _CountingEmbedder:
    def __init__(self, inner: object) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> object:
        self.calls += 1
        return self.inner.embed(texts)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("request_kwargs", "error", "argument"),
    [
        ({"query": "   "}, QueryRequired, "query"),
        ({"query": None}, QueryRequired, "query"),
        ({"mode": "fuzzy"}, InvalidRequest, "mode"),
        ({"alpha": 1.5}, InvalidRequest, "alpha"),
        ({"alpha": float("nan")}, InvalidRequest, "alpha"),
        ({"alpha": True}, InvalidRequest, "alpha"),
        ({"rrf_k": 0}, InvalidRequest, "rrf_k"),
        ({"min_similarity": -1.5}, InvalidRequest, "min_similarity"),
        ({"limit": 0}, InvalidRequest, "limit"),
        ({"limit": 2.5}, InvalidRequest, "limit"),
        ({"candidates": 0}, InvalidRequest, "candidates"),
        ({"filters": SearchFilters(document_ids=["bad"])}, InvalidRequest, "document_ids"),
    ],
)
def test_invalid_requests_fail_before_any_retrieval(
    ws: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    request_kwargs: dict[str, object],
    error: type[Exception],
    argument: str,
) -> None:
    counting = _CountingEmbedder(ws.embedder)
    monkeypatch.setattr(ws, "_embedder", counting)
    fts_calls = []
    monkeypatch.setattr("kbmcp.service.search.run_search", lambda *a, **k: fts_calls.append(a))
    kwargs = {"query": "keys", **request_kwargs}
    with pytest.raises(error) as raised:
        search(ws, ws.local_principal(), SearchRequest(**kwargs))  # type: ignore[arg-type]
    assert raised.value.details["argument"] == argument  # type: ignore[attr-defined]
    assert counting.calls == 0 and fts_calls == []


def test_unknown_mode_lists_the_valid_ones(ws: Workspace) -> None:
    with pytest.raises(InvalidRequest) as error:
        search(ws, ws.local_principal(), SearchRequest("keys", mode="fuzzy"))
    assert error.value.details["valid"] == ["hybrid", "lexical", "semantic", "rrf", "keyword"]


def test_limit_above_the_maximum_is_clamped(ws: Workspace) -> None:
    response = search(ws, ws.local_principal(), SearchRequest("keys", limit=MAX_LIMIT + 1))
    assert response.stats.limit == MAX_LIMIT and response.stats.limit_clamped
