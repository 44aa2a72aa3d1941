"""The store contract (kbmcp/store/backend.py): both backends implement every concern with the
same functions, open from the settings, and give the services the same transactions, error
mapping and per-thread connections."""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kbmcp.config import Settings, load_settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest, ReadOnly, StoreError
from kbmcp.store.backend import Store
from kbmcp.store.open_store import open_store
from kbmcp.store.postgres.store import PostgresStore
from kbmcp.store.sqlite.store import SqliteStore
from kbmcp.workspace import Workspace

BACKEND_CLASSES = (SqliteStore, PostgresStore)


def concerns() -> list[tuple[str, type]]:
    """Each concern of the Store protocol: an attribute `name` annotated with the Protocol of
    the same-named contract module kbmcp/store/<name>.py."""
    found = []
    for name, annotation in Store.__annotations__.items():
        try:
            module = importlib.import_module(f"kbmcp.store.{name}")
        except ModuleNotFoundError:
            continue
        protocol = getattr(module, str(annotation), None)
        if isinstance(protocol, type):
            found.append((name, protocol))
    return found


def functions_of(protocol: type) -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def signature_problems(wanted: Callable[..., Any], given: Callable[..., Any]) -> list[str]:
    """How `given` differs from the contract's `wanted` (a method: its `self` is skipped):
    parameter names, order, kinds and defaults must match; a backend may add parameters of its
    own only with defaults (options its own code uses, e.g. bulk loads)."""
    expected = list(inspect.signature(wanted).parameters.values())[1:]
    actual = list(inspect.signature(given).parameters.values())
    if actual and actual[0].name == "self":  # a function of a class (a bound method has none)
        actual = actual[1:]
    problems = []
    for want, have in zip(expected, actual, strict=False):
        if (want.name, want.kind, want.default) != (have.name, have.kind, have.default):
            problems.append(f"parameter {have.name!r} should be {want}")
    if len(actual) < len(expected):
        problems.append(f"missing parameters {[p.name for p in expected[len(actual) :]]}")
    for extra in actual[len(expected) :]:
        if extra.default is inspect.Parameter.empty:
            problems.append(f"extra parameter {extra.name!r} has no default")
    return problems


def test_the_contract_has_concerns() -> None:
    assert "vectors" in dict(concerns())


@pytest.mark.parametrize("backend", BACKEND_CLASSES, ids=lambda cls: cls.kind)
def test_each_backend_implements_every_concern(backend: type) -> None:
    problems = []
    for name, protocol in concerns():
        implementation = getattr(backend, name, None)
        if implementation is None:
            problems.append(f"{name}: missing")
            continue
        for function_name, wanted in functions_of(protocol).items():
            given = getattr(implementation, function_name, None)
            if given is None:
                problems.append(f"{name}.{function_name}: missing")
                continue
            problems += [f"{name}.{function_name}: {p}" for p in signature_problems(wanted, given)]
    assert problems == []


@pytest.mark.parametrize("backend", BACKEND_CLASSES, ids=lambda cls: cls.kind)
def test_each_backend_has_every_store_member(backend: type) -> None:
    problems = []
    for name in Store.__annotations__:
        if not hasattr(backend, name) and name not in ("shown",):  # `shown`: set per instance
            problems.append(f"{name}: missing")
    for name, wanted in functions_of(Store).items():
        given = getattr(backend, name, None)
        if given is None:
            problems.append(f"{name}: missing")
        else:
            problems += [f"{name}: {p}" for p in signature_problems(wanted, given)]
    assert problems == []


def test_a_signature_mismatch_is_found() -> None:
    """The checks above can fail: a renamed, a missing and an extra parameter are reported."""

    class Contract:
        def f(self, conn: Any, ids: list[int], *, limit: int = 10) -> None: ...

    def renamed(conn: Any, chunk_ids: list[int], *, limit: int = 10) -> None: ...
    def shorter(conn: Any, ids: list[int]) -> None: ...
    def extra(conn: Any, ids: list[int], *, limit: int = 10, mode: str) -> None: ...
    def fine(conn: Any, ids: list[int], *, limit: int = 10, batch: int = 100) -> None: ...

    assert signature_problems(Contract.f, renamed)
    assert signature_problems(Contract.f, shorter)
    assert signature_problems(Contract.f, extra)
    assert signature_problems(Contract.f, fine) == []


# ---------------------------------------------------------------- settings


def test_a_url_is_kept_as_given_never_as_a_path(tmp_path: Path) -> None:
    url = "postgresql://me:pw@db.example:5432/kb?sslmode=require"
    settings = load_settings({"KBMCP_DB": f"  {url} "})
    assert settings.db == url and settings.is_postgres
    assert settings.shown_db == "postgresql://me:***@db.example:5432/kb?sslmode=require"
    with pytest.raises(StoreError, match="is a PostgreSQL database, not a file"):
        _ = settings.db_path
    assert Settings(db=tmp_path / "a.db").with_db(url).db == url
    as_file = load_settings({"KBMCP_DB": "~/kb.db"})
    assert as_file.db == Path("~/kb.db").expanduser() and not as_file.is_postgres
    assert as_file.db_path == as_file.db


# ---------------------------------------------------------------- opening


def test_a_workspace_opens_either_backend(backend_workspace: Workspace) -> None:
    store = backend_workspace.store
    expected = "postgres" if backend_workspace.settings.is_postgres else "sqlite"
    assert store.kind == expected
    backend_workspace.ensure_model()
    recorded = store.vectors.recorded_model(backend_workspace.conn)
    assert recorded == HashingEmbedder().fingerprint


def test_immutable_is_for_files_only(tmp_path: Path) -> None:
    url = "postgresql://me:pw@db.example/kb"
    with pytest.raises(InvalidRequest, match="applies to a knowledge-base file") as refused:
        open_store(Settings(db=url, immutable=True))
    assert "pw" not in refused.value.message
    assert open_store(Settings(db=tmp_path / "kb.db", immutable=True)).kind == "sqlite"


def test_an_empty_postgres_database_needs_create(fresh_postgres_url: str) -> None:
    settings = Settings(db=fresh_postgres_url, embedder="hash")
    with pytest.raises(StoreError, match="is empty, not a knowledge base yet"):
        Workspace(settings, create=False)
    Workspace(settings, create=True).close()
    Workspace(settings, create=False).close()  # a knowledge base now


def test_another_applications_database_is_never_written(fresh_postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(fresh_postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(StoreError, match=r"tables of another application \(invoices\)"):
        Workspace(Settings(db=fresh_postgres_url), create=True)
    with psycopg.connect(fresh_postgres_url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    assert tables == [("invoices",)]


# ---------------------------------------------------------------- transactions


def count_tenants(workspace: Workspace, conn: Any = None) -> int:
    conn = conn if conn is not None else workspace.conn
    return int(conn.execute("SELECT count(*) FROM tenant").fetchone()[0])


def insert_tenant(conn: Any, name: str) -> None:
    conn.execute(
        "INSERT INTO tenant (public_id, name, created_at) "
        f"VALUES ('ten_{name}', '{name}', '2026-01-01T00:00:00Z')"
    )


def test_a_write_transaction_commits_whole_or_nothing(backend_workspace: Workspace) -> None:
    store, conn = backend_workspace.store, backend_workspace.conn
    with pytest.raises(RuntimeError), store.write_transaction(conn):
        insert_tenant(conn, "a")
        raise RuntimeError("stop")
    assert count_tenants(backend_workspace) == 0 and not store.in_transaction(conn)
    with store.write_transaction(conn):
        insert_tenant(conn, "a")
        with pytest.raises(RuntimeError), store.savepoint(conn):
            insert_tenant(conn, "b")
            raise RuntimeError("undo b only")
    names = [row[0] for row in conn.execute("SELECT name FROM tenant")]
    assert names == ["a"]


def test_constraint_violations_are_told_apart(backend_workspace: Workspace) -> None:
    store, conn = backend_workspace.store, backend_workspace.conn
    with store.write_transaction(conn):
        insert_tenant(conn, "a")
    with pytest.raises(Exception) as raised, store.write_transaction(conn):
        insert_tenant(conn, "a")
    assert store.is_constraint_violation(raised.value)
    assert not store.is_disk_full(raised.value)
    assert not store.is_constraint_violation(RuntimeError("x"))
    assert isinstance(raised.value, store.driver_errors)


def test_a_read_snapshot_does_not_see_later_commits(backend_workspace: Workspace) -> None:
    store, conn = backend_workspace.store, backend_workspace.conn
    other = store.connect()
    try:
        with store.read_snapshot(conn):
            assert count_tenants(backend_workspace) == 0
            with store.write_transaction(other):
                insert_tenant(other, "late")
            assert count_tenants(backend_workspace) == 0  # the same snapshot
            with store.read_snapshot(conn):  # joins the snapshot it is in
                assert count_tenants(backend_workspace) == 0
        assert count_tenants(backend_workspace) == 1
    finally:
        store.close([other])


# ---------------------------------------------------------------- connections


def test_one_connection_per_live_thread(backend_workspace: Workspace) -> None:
    seen: list[Any] = []

    def use() -> None:
        seen.append(backend_workspace.conn)
        count_tenants(backend_workspace)

    for _ in range(3):  # one after another: each takes over the ended thread's connection
        thread = threading.Thread(target=use)
        thread.start()
        thread.join()
    assert len({id(conn) for conn in seen}) == 1
    assert backend_workspace.connection_count == 2  # the main thread's and the workers'


def test_a_connection_the_server_dropped_is_replaced(fresh_postgres_url: str) -> None:
    import psycopg

    with Workspace(Settings(db=fresh_postgres_url, embedder="hash"), create=True) as ws:
        first = ws.conn
        pid = first.info.backend_pid
        with psycopg.connect(fresh_postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError):
            count_tenants(ws)  # the call that finds it dropped fails...
        assert count_tenants(ws) >= 0  # ...and the next one has a new connection
        assert ws.conn is not first and ws.connection_count == 1


# ---------------------------------------------------------------- read-only


@pytest.fixture
def reader_url(fresh_postgres_url: str) -> Iterator[str]:
    """The module's database (a knowledge base) through a role that may only read it."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    Workspace(Settings(db=fresh_postgres_url, embedder="hash"), create=True).close()
    with psycopg.connect(fresh_postgres_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS kbmcp_reader")
        admin.execute("CREATE ROLE kbmcp_reader LOGIN")
        admin.execute("GRANT USAGE ON SCHEMA public TO kbmcp_reader")
        admin.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO kbmcp_reader")
    parts = urlsplit(fresh_postgres_url)
    host = parts.netloc.rpartition("@")[2]
    try:
        yield urlunsplit(parts._replace(netloc=f"kbmcp_reader@{host}"))
    finally:
        with psycopg.connect(fresh_postgres_url, autocommit=True) as admin:
            admin.execute("DROP OWNED BY kbmcp_reader")
            admin.execute("DROP ROLE kbmcp_reader")


def test_a_role_that_cannot_write_is_read_only(reader_url: str) -> None:
    with Workspace(Settings(db=reader_url, embedder="hash"), create=False) as ws:
        store, conn = ws.store, ws.conn
        assert store.is_read_only(conn)
        with pytest.raises(ReadOnly, match="can be read but not changed"):
            store.ensure_writable(conn)
        with pytest.raises(ReadOnly, match="refused a write"), store.write_transaction(conn):
            insert_tenant(conn, "x")
        assert count_tenants(ws) == 0
        ws.ensure_model()  # nothing to record, nothing refused: reading works


def test_a_writable_database_is_not_read_only(backend_workspace: Workspace) -> None:
    store, conn = backend_workspace.store, backend_workspace.conn
    assert not store.is_read_only(conn)
    store.ensure_writable(conn)
