"""Hybrid fusion with the default model: a lone weak keyword hit does not outrank the meaning.

"how do I make a loaf at home" shares one word, "home", with a database runbook and none with
the page about baking bread, which the model finds by meaning (cosine ~0.64 against ~0.14).
Min-max normalisation gave the keyword channel's only candidate the channel's full weight, and
the runbook came first. Against the query's ceiling, "home" is a small part of what was asked.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbmcp.config import Settings
from kbmcp.search.models import SearchRequest, SearchResponse
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.search import search
from kbmcp.workspace import Workspace

QUERY = "how do I make a loaf at home"
PAGES = {
    "kitchen/bread.md": """\
        # Baking bread

        Mix flour, water, salt and yeast into dough. Knead it for ten minutes, let it rise until
        doubled, shape it, then bake it in the hottest oven you have for forty minutes.
        """,
    "ops/runbook.md": """\
        # Database runbook

        Backups run nightly. To restore one, stop the service, copy the latest dump from the home
        directory of the postgres user and run pg_restore against an empty database.
        """,
    "garden/tomatoes.md": """\
        # Tomatoes

        Tomatoes want full sun. Mulch the beds, water deeply twice per week and pick them when red.
        """,
    "finance/taxes.md": """\
        # Quarterly taxes

        File the VAT return by the twentieth day after each quarter ends; attach each invoice.
        """,
}


@pytest.fixture(scope="module")
def kitchen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("kitchen")
    for path, text in PAGES.items():
        (root / "pages" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "pages" / path).write_text(textwrap.dedent(text), encoding="utf-8")
    workspace = Workspace(Settings(db=root / "kb.db", embedder="minilm"), long_lived=True)
    add_paths(workspace, workspace.local_principal(), [Path(root / "pages")], IngestOptions())
    yield workspace
    workspace.close()


def _search(ws: Workspace, **kwargs: object) -> SearchResponse:
    return search(ws, ws.local_principal(), SearchRequest(QUERY, **kwargs))  # type: ignore[arg-type]


def test_a_lone_weak_keyword_hit_does_not_outrank_the_meaning(kitchen: Workspace) -> None:
    lexical = _search(kitchen, mode="lexical").results
    assert [r.path for r in lexical] == ["ops/runbook.md"]  # the channel's only candidate
    semantic = _search(kitchen, mode="semantic").results
    assert semantic[0].path == "kitchen/bread.md"
    runbook = next(r for r in semantic if r.path == "ops/runbook.md")
    assert semantic[0].semantic_similarity - runbook.semantic_similarity > 0.4
    assert semantic[-1].path != "ops/runbook.md"  # so min-max gave it a vector share too

    hybrid = _search(kitchen).results
    assert hybrid[0].path == "kitchen/bread.md"
    fused = {r.path: r.score for r in hybrid}
    # The kitchen page has the vector channel's full half and no keyword share; the runbook's
    # keyword share is the fraction of the query's ceiling that "home" is.
    assert fused["kitchen/bread.md"] == pytest.approx(0.5)
    assert fused["ops/runbook.md"] < 0.25
