"""PostgreSQL restarts and shutdowns (issue 33, item 1).

- A request whose connection the server dropped is made again, once, on a new connection when
  it has written nothing; one that began a write is reported as `store_error` and never made
  twice. While the server is down every call is `store_error "cannot connect to PostgreSQL at
  …"`, never `internal_error`.
- Connections a server keeps between requests are closed when idle, so a smart shutdown
  (SIGTERM: PostgreSQL waits for every session to end) completes.

The restart runs on a PostgreSQL server of the test's own (bench/postgres_restart.py starts
one: the suite's shared server must not be restarted under the other tests)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import StoreError
from kbmcp.server.app import build_server
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.store.backend import Connection
from kbmcp.workspace import Workspace
from tests.mcp_support import payload, write
from tests.store_backends import selected_backends
from tests.test_bench_search import load_bench_module

pytestmark = pytest.mark.skipif(
    "postgres" not in selected_backends(), reason="PostgreSQL only (KBMCP_TEST_BACKENDS)"
)


def terminate(url: str, pids: list[int]) -> None:
    """What a restart does to each session: the server ends it (AdminShutdown)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def backend_pid(conn: Connection) -> int:
    return int(conn.info.backend_pid)


def sessions(url: str, database: str) -> int:
    """Sessions open on `database`, other than the one counting them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def workspace(new_postgres_url: str) -> Any:
    settings = Settings(db=new_postgres_url, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as ws:
        yield ws


# --------------------------------------------------------------------------- one request


def test_a_read_is_made_again_on_a_new_connection(workspace: Workspace, new_postgres_url: str):
    attempts: list[int] = []

    def read() -> int:
        attempts.append(backend_pid(workspace.conn))
        return int(workspace.conn.execute("SELECT count(*) FROM tenant").fetchone()[0])

    terminate(new_postgres_url, [backend_pid(workspace.conn)])
    assert workspace.run_request(read) >= 0
    assert len(attempts) == 2 and attempts[0] != attempts[1]
    assert workspace.connection_count == 1  # the dropped one is gone


def test_a_write_is_never_made_twice(workspace: Workspace, new_postgres_url: str) -> None:
    """The connection is cut inside the write transaction: the request is reported, not made
    again (it may have been written: a lost COMMIT cannot be told from a lost statement)."""
    store = workspace.store
    attempts = 0

    def write_then_lose_the_connection() -> None:
        nonlocal attempts
        attempts += 1
        conn = workspace.conn
        with store.write_transaction(conn):
            conn.execute("INSERT INTO tenant VALUES (7, 'ten_7', 'seven', 'x')")
            terminate(new_postgres_url, [backend_pid(conn)])
            conn.execute("SELECT 1")

    with pytest.raises(StoreError) as raised:
        workspace.run_request(write_then_lose_the_connection)
    assert attempts == 1
    message = raised.value.message
    assert message.startswith(f"lost the connection to PostgreSQL at {store.shown} during a ")
    assert "it was not made again" in message and "\n" not in message
    assert workspace.conn.execute("SELECT count(*) FROM tenant WHERE id = 7").fetchone()[0] == 0


def test_a_write_that_had_not_begun_is_made_again(
    workspace: Workspace, new_postgres_url: str
) -> None:
    """The dropped connection fails the request's first statement, a read before its write
    transaction: nothing was written, so the request is made again and writes once."""
    store = workspace.store
    attempts = 0

    def read_then_write() -> None:
        nonlocal attempts
        attempts += 1
        conn = workspace.conn
        conn.execute("SELECT count(*) FROM tenant").fetchone()
        with store.write_transaction(conn):
            conn.execute("INSERT INTO tenant VALUES (8, 'ten_8', 'eight', 'x')")

    terminate(new_postgres_url, [backend_pid(workspace.conn)])
    workspace.run_request(read_then_write)
    assert attempts == 2
    assert workspace.conn.execute("SELECT count(*) FROM tenant WHERE id = 8").fetchone()[0] == 1


def test_an_error_that_is_not_a_lost_connection_is_not_made_again(workspace: Workspace) -> None:
    import psycopg

    attempts = 0

    def broken_sql() -> None:
        nonlocal attempts
        attempts += 1
        workspace.conn.execute("SELECT no_such_column FROM tenant")

    with pytest.raises(psycopg.errors.UndefinedColumn):
        workspace.run_request(broken_sql)
    assert attempts == 1


@pytest.mark.anyio
async def test_tool_calls_survive_dropped_connections(
    workspace: Workspace, new_postgres_url: str, tmp_path: Path
) -> None:
    """Every session of the server is cut between calls (a restart while it was idle): the
    next search, read and remember succeed (before: internal_error, "terminating connection
    due to administrator command"), and remember writes one memory."""
    from mcp import Client

    folder = write(tmp_path / "notes", {"heron.md": "# Heron\n\nThe heron waits.\n"})
    add_paths(workspace, workspace.local_principal(), [folder], IngestOptions())
    database = workspace.conn.info.dbname
    async with Client(build_server(workspace)) as client:
        found = payload(await client.call_tool("search_knowledge", {"query": "heron"}))
        document_id = found["results"][0]["document_id"]
        calls = [
            ("search_knowledge", {"query": "heron"}),
            ("search_knowledge", {"document_id": document_id}),
            ("list_documents", {}),
            ("remember", {"content": "Herons wait for hours."}),
        ]
        for name, arguments in calls:
            terminate(new_postgres_url, session_pids(new_postgres_url, database))
            result = await client.call_tool(name, arguments)
            assert not result.is_error, payload(result)
    count = workspace.run_request(lambda: workspace.conn.execute(MEMORIES).fetchone()[0])
    assert count == 1


MEMORIES = (
    "SELECT count(*) FROM document AS d JOIN knowledge_base AS k ON k.id = d.knowledge_base_id"
    " WHERE k.kind = 'memories'"
)


def session_pids(url: str, database: str) -> list[int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return [int(row[0]) for row in rows]


# --------------------------------------------------------------------------- idle connections


def test_idle_connections_are_closed(workspace: Workspace, new_postgres_url: str) -> None:
    database = workspace.conn.info.dbname
    workspace.close_idle_connections(0.3)  # (this thread's connection is idle from now on)

    def request() -> None:
        workspace.run_request(lambda: workspace.conn.execute("SELECT 1").fetchone())

    threads = [threading.Thread(target=request) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline = time.monotonic() + 10
    while sessions(new_postgres_url, database) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sessions(new_postgres_url, database) == 0
    assert workspace.connection_count == 0
    request()  # the next request opens one again
    assert workspace.connection_count == 1


def test_a_connection_in_use_is_not_closed(workspace: Workspace) -> None:
    """Handed out outside a request (a watch's sync, an ingest embedding for minutes between
    two statements): kept until the next check-in, however long."""
    workspace.close_idle_connections(0.2)
    held: list[tuple[Connection, bool]] = []
    done = threading.Event()

    def long_user() -> None:
        held.append((workspace.conn, False))
        done.wait(10)
        conn = workspace.conn
        # Checked by the user itself: once its thread has ended, its connection is idle and
        # the closer may close it at once (correctly), before the main thread could look.
        held.append((conn, conn.closed))

    thread = threading.Thread(target=long_user)
    thread.start()
    time.sleep(1.0)
    done.set()
    thread.join()
    (first, _), (second, closed) = held
    assert first is second and not closed


# --------------------------------------------------------------------------- a real restart


def test_a_restart_under_load_is_only_clear_store_errors() -> None:
    """bench/postgres_restart.py, shortened: a fast restart under search load over HTTP, then
    a smart shutdown beside the idle server. Before: internal_error for calls on stale
    connections, and the smart shutdown never ended while kbmcp ran."""
    bench = load_bench_module("postgres_restart")
    report = bench.restart_run(
        clients=3, before=2.0, down=1.5, after=4.0, idle_seconds=1.0, smart_wait=20.0
    )
    outcomes = report.outcomes()
    assert report.unexpected() == [], outcomes
    assert outcomes["ok"] > 0 and outcomes["store_error"] > 0, outcomes  # it was really down
    first = report.first_success_after_restart()
    assert first is not None and first <= 2.0, first
    assert report.smart_shutdown_seconds is not None, "the smart shutdown did not end"
    assert report.smart_shutdown_seconds < 10
    assert report.server_exit == 0 and "Traceback" not in report.server_log, report.server_log
