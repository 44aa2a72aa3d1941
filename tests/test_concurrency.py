"""One workspace shared by many threads, as the MCP server shares it (a connection per thread)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kbmcp.search.models import SearchRequest
from kbmcp.service.listing import list_documents, list_knowledge_bases
from kbmcp.service.read import read_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.patience import ceiling
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


def test_reads_do_not_wait_for_a_writer_of_the_same_process(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Each thread reads through its own connection: while another thread holds the writer
    lock inside an open write transaction, searches, reads and listings still answer (and see
    the last committed state)."""
    ingest(workspace, write_small_corpus(tmp_path))
    principal = workspace.local_principal()
    request = SearchRequest(query="rotate api keys")
    expected = [r.chunk_id for r in search(workspace, principal, request).results]
    writing, release = threading.Event(), threading.Event()

    def writer() -> None:
        conn = workspace.conn
        with workspace.lock, workspace.store.write_transaction(conn):
            conn.execute("UPDATE document SET title = 'changed, not committed'")
            writing.set()
            release.wait(timeout=ceiling(30))
            raise RuntimeError("roll back")  # the uncommitted title never lands

    thread = threading.Thread(target=lambda: _swallow(writer))
    thread.start()
    try:
        assert writing.wait(timeout=ceiling(10))
        with ThreadPoolExecutor(max_workers=2) as pool:
            found = pool.submit(search, workspace, principal, request).result(timeout=ceiling(10))
            listed = pool.submit(list_knowledge_bases, workspace, principal).result(
                timeout=ceiling(10)
            )
        assert [r.chunk_id for r in found.results] == expected
        assert {r.title for r in found.results} != {"changed, not committed"}
        assert len(listed) == 1
    finally:
        release.set()
        thread.join(timeout=ceiling(30))


def test_each_thread_has_its_own_connection_and_close_closes_them_all(
    workspace: Workspace,
) -> None:
    barrier = threading.Barrier(3)

    def connection_of_this_thread(_: int) -> object:
        barrier.wait(timeout=ceiling(10))  # three threads at once: three connections
        return workspace.conn

    with ThreadPoolExecutor(max_workers=3) as pool:
        connections = list(pool.map(connection_of_this_thread, range(3)))
    assert len({id(c) for c in connections}) == 3
    assert all(c is not workspace.conn for c in connections)
    closed = workspace.store.driver_errors
    workspace.close()
    with pytest.raises(closed):
        connections[0].execute("SELECT 1")


def _swallow(function: Callable[[], None]) -> None:
    with contextlib.suppress(RuntimeError):
        function()
