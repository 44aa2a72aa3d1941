"""`kbmcp search`: --json equals the service's response (snapshotted), readable output, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic_core import to_jsonable_python

from kbmcp.cli import cli
from kbmcp.config import Settings
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service.search import search as service_search
from kbmcp.workspace import Workspace
from tests.mcp_support import connect
from tests.ranked_output import stable
from tests.search_corpus import write_small_corpus


@pytest.fixture
def db(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Path | str:
    monkeypatch.setenv("KBMCP_NOW", "2026-01-01T00:00:00Z")
    db: Path | str = tmp_path / "cli.db"
    if backend == "postgres":
        db = str(request.getfixturevalue("fresh_postgres_url"))
    folder = write_small_corpus(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(db), "add", str(folder), "--kb", "handbook"])
    assert result.exit_code == 0, result.output
    return db


def _run(db: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--db", str(db), "search", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize(
    "args",
    [
        ["how do I rotate keys"],
        ["how do I rotate keys", "--mode", "lexical"],
        ["search scope before ranking", "--mode", "semantic", "--limit", "3"],
        ["search scope before ranking", "--mode", "rrf", "--rrf-k", "10", "--limit", "3"],
        ["keys", "--kb", "handbook", "--path", "handbook/", "--tag", "team=security",
         "--meta", "version=2"],
        ["keys", "--path", "nowhere/", "--tag", "team=security"],
    ],
    ids=["hybrid", "lexical", "semantic", "rrf", "filtered", "unmatched"],
)  # fmt: skip
def test_json_output_snapshot(db: Path, args: list[str], snapshot_json: Any) -> None:
    assert stable(_run(db, *args)) == snapshot_json


def test_json_output_equals_the_service_response(db: Path) -> None:
    cli_response = _run(db, "keys", "--path", "handbook/", "--limit", "2")
    with Workspace(Settings(db=db, embedder="hash")) as ws:
        request = SearchRequest(
            "keys", limit=2, filters=SearchFilters(document_paths=["handbook/"])
        )
        service = to_jsonable_python(service_search(ws, ws.local_principal(), request))
    assert stable(cli_response) == stable({"request_mode": "query", **service})


@pytest.mark.anyio
async def test_json_output_is_the_mcp_tools_result(db: Path) -> None:
    """`search --json` and `search_knowledge` answer with the same object, request_mode first."""
    cli_response = _run(db, "keys", "--path", "handbook/", "--limit", "2")
    async with connect("inprocess", db) as client:
        result = await client.call_tool(
            "search_knowledge", {"query": "keys", "document_paths": ["handbook/"], "limit": 2}
        )
    assert not result.is_error
    tool_response = result.structured_content
    assert next(iter(cli_response)) == "request_mode" == next(iter(tool_response))
    # How each channel ran differs by design: the server keeps in-memory accelerators, a one-shot
    # CLI command answers from SQL (docs/search.md). Everything else is the same.
    for response in (cli_response, tool_response):
        for strategy in ("lexical_strategy", "vector_strategy"):
            response["stats"].pop(strategy)
    assert stable(cli_response) == stable(tool_response)


def test_a_fusion_option_selects_its_mode_and_is_refused_by_another(db: Path, kbmcp: Any) -> None:
    assert stable(_run(db, "keys", "--rrf-k", "10")) == stable(
        _run(db, "keys", "--mode", "rrf", "--rrf-k", "10")
    )
    assert _run(db, "keys", "--alpha", "0.3")["alpha"] == 0.3
    refused = kbmcp("--db", db, "search", "keys", "--mode", "lexical", "--rrf-k", "10")
    assert refused.code == 2 and "--rrf-k" in refused.err and "'lexical'" in refused.err


def test_readable_output_shows_rank_score_title_location_and_excerpt(db: Path) -> None:
    args = ["--db", str(db), "search", "rotate keys", "--limit", "1"]
    readable = CliRunner().invoke(cli, args)
    as_json = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)["results"][0]
    assert readable.exit_code == 0, readable.output
    lines = readable.output.splitlines()
    cite = f"{as_json['citation']['line_start']}-{as_json['citation']['line_end']}"
    assert lines[0] == (f" 1. {as_json['score']:.4f}  {as_json['title']}  {as_json['path']}:{cite}")
    first_excerpt_line = next(line for line in as_json["excerpt"].splitlines() if line.strip())
    assert f"    {first_excerpt_line}" in lines


def test_empty_results_explain_which_filter_matched_nothing(db: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(db), "search", "keys", "--path", "zzz/"])
    assert result.exit_code == 0
    assert "no results (filters that matched nothing: --path)" in result.output


def test_unknown_knowledge_base_name_is_an_error(db: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(db), "search", "keys", "--kb", "nope"])
    assert result.exit_code != 0
