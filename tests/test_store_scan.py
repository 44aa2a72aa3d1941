"""The scan concern (kbmcp/store/scan.py): scan mode (the most recently updated or created
documents and memories, newest first, in a time window) answers the same on SQLite and on a
PostgreSQL copy of the file (ids unchanged), errors included, for callers who see different
parts of the corpus: both sorts, windows at and between the instants the corpus was written at
(ties at one instant are ordered by id), every scope filter, and each kind alone."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from kbmcp.search.models import SearchFilters
from kbmcp.service.scan import scan_recent
from kbmcp.workspace import Workspace
from tests.backend_twins import T3, outcome, principals, twin_workspaces
from tests.mcp_support import T0, T1, T2
from tests.store_backends import rows


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[Workspace, Workspace]]:
    yield from twin_workspaces(tmp_path_factory.mktemp("scan"), postgres_url)


WINDOWS = [
    (None, None),
    (T1, None),
    (None, T1),
    (T0, T2),
    (T1, T3),
    ("2026-01-02", "2026-01-02T00:00:01Z"),  # exactly one instant
    ("2026-01-01T12:00:00+02:00", None),  # normalised to UTC
    ("2030-01-01", None),  # nothing
]


def test_windows_sorts_and_limits_answer_the_same(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    seen = 0
    for principal in principals(sqlite).values():
        for (since, until), sort, limit in itertools.product(
            WINDOWS, ["updated_desc", "created_desc"], [1, 4, 500]
        ):
            call = partial(scan_recent, principal=principal, since=since, until=until,
                           sort=sort, limit=limit)  # fmt: skip
            want = outcome(partial(call, sqlite))
            assert outcome(partial(call, pg)) == want, (since, until, sort, limit)
            if not isinstance(want, dict):
                seen += len(want.results)
    assert seen > 0
    everything = scan_recent(pg, sqlite.local_principal(), limit=500)
    kinds = {item.kind for item in everything.results}
    assert kinds == {"document", "memory"}
    order = [(item.updated_at, item.document_id) for item in everything.results]
    assert order == sorted(order, key=lambda key: ([-b for b in key[0].encode()], key[1]))
    assert len(order) > len({updated for updated, _ in order})  # ties at one instant


def test_every_filter_scans_the_same(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    kbs = dict(rows(sqlite, "SELECT name, public_id FROM knowledge_base"))
    documents = [row[0] for row in rows(sqlite, "SELECT public_id FROM document ORDER BY id")]
    filters = [
        SearchFilters(knowledge_base_ids=[kbs["alpha"]]),
        SearchFilters(knowledge_base_ids=[kbs["Zeta"], kbs["Émile"]]),
        SearchFilters(knowledge_base_ids=["kb_0000000000000000"]),
        SearchFilters(document_ids=documents[:3]),
        SearchFilters(document_paths=["b/", "B", "a_b/100%", "é"]),
        SearchFilters(document_paths=["b/\x00"]),
        SearchFilters(tags={"typed": "yes"}),
        SearchFilters(tags={"topic": "ops"}),
        SearchFilters(metadata={"value": 2}),
        SearchFilters(metadata={"value": "true"}),
        SearchFilters(memory_store_ids=[kbs["journal"]] if "journal" in kbs else None),
        SearchFilters(include_documents=False),
        SearchFilters(include_memories=False),
        SearchFilters(include_documents=False, include_memories=False),
    ]
    answers = []
    for principal in principals(sqlite).values():
        for scope in filters:
            for sort in ("updated_desc", "created_desc"):
                call = partial(scan_recent, principal=principal, filters=scope, sort=sort,
                               limit=50)  # fmt: skip
                want = outcome(partial(call, sqlite))
                assert outcome(partial(call, pg)) == want, scope
                answers.append(want)
    assert any(isinstance(a, dict) for a in answers)
    assert sum(len(a.results) for a in answers if not isinstance(a, dict)) > 0


def test_errors_are_the_same(twins: tuple[Workspace, Workspace]) -> None:
    sqlite, pg = twins
    owner = sqlite.local_principal()
    calls: list[dict[str, Any]] = [
        {"since": T2, "until": T1},
        {"since": T1, "until": T1},
        {"since": "yesterday"},
        {"until": 7},
        {"sort": "oldest"},
        {"limit": 0},
        {"limit": 10_000},  # clamped, not refused
    ]
    for arguments in calls:
        want = outcome(partial(scan_recent, sqlite, owner, **arguments))
        assert outcome(partial(scan_recent, pg, owner, **arguments)) == want, arguments
