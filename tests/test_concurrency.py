"""One workspace (one apsw connection) shared by many threads, as the MCP server shares it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kbmcp.search.models import SearchRequest
from kbmcp.service.listing import list_documents, list_knowledge_bases
from kbmcp.service.read import read_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest, write_small_corpus

QUERIES = ["rotate api keys", "backups restore", "on-call escalation", "database"]
MODES = ["hybrid", "lexical", "semantic", "rrf"]


def test_concurrent_searches_reads_and_listings_match_sequential_results(
    workspace: Workspace, tmp_path: Path
) -> None:
    ingest(workspace, write_small_corpus(tmp_path))
    principal = workspace.local_principal()
    requests = [SearchRequest(query=q, mode=m) for q in QUERIES for m in MODES]

    def ranking(request: SearchRequest) -> list[str]:
        return [r.chunk_id for r in search(workspace, principal, request).results]

    def read_all_documents() -> list[str]:
        page = list_documents(workspace, principal, limit=200)
        return [
            read_document(workspace, principal, doc.document_id).content for doc in page.documents
        ]

    expected = [ranking(r) for r in requests]
    expected_contents = read_all_documents()
    assert any(expected), "the corpus must give results, or the comparison proves nothing"

    # Searches (which release the lock while embedding and hold it for their read transaction)
    # interleave with reads and listings on the same connection from 8 threads.
    with ThreadPoolExecutor(max_workers=8) as pool:
        rankings = [pool.submit(ranking, r) for r in requests * 5]
        contents = [pool.submit(read_all_documents) for _ in range(10)]
        listings = [pool.submit(list_knowledge_bases, workspace, principal) for _ in range(10)]
        assert [f.result() for f in rankings] == expected * 5
        assert all(f.result() == expected_contents for f in contents)
        assert all(len(f.result()) == 1 for f in listings)
