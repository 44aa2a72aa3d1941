"""Docs that cannot drift: every JSON example of the tools (docs/tools.md, docs/search.md) is
checked against the schemas the tools really have (tests/doc_examples.py): a result example
that lacks a field the tool returns (`citation.sha256`, `revision_sha256`), or shows one it
does not, fails until the docs follow. (The resources' examples are checked against the MCP
types' own schemas, which are the protocol's.)"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_types import ReadResourceResult, Tool

from kbmcp.server.app import build_server
from tests.doc_examples import ERROR_SCHEMA, Root, json_blocks, problems
from tests.mcp_support import REPO_ROOT, hash_workspace

DOCS = ["docs/tools.md", "docs/search.md"]
JSON_RPC_REQUEST = {
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string"},
        "id": {},
        "method": {"type": "string"},
        "params": {"type": "object", "additionalProperties": True},
    },
}


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> list[Root]:
    """The schemas of every tool's arguments and result, as a client lists them."""

    async def listed() -> list[Tool]:
        async with Client(build_server(workspace)) as client:
            return (await client.list_tools()).tools

    with hash_workspace(tmp_path_factory.mktemp("schemas") / "kb.db") as workspace:
        tools = anyio.run(listed)
    found = [
        Root("an error", ERROR_SCHEMA, complete=True),
        # The MCP messages the docs show besides tool calls (resources): the protocol's own
        # shapes, whose optional fields an example may leave out.
        Root("a JSON-RPC request", JSON_RPC_REQUEST, complete=False),
        Root(
            "a resources/read result",
            ReadResourceResult.model_json_schema(by_alias=True),
            complete=False,
        ),
    ]
    for tool in tools:
        found.append(Root(f"{tool.name} arguments", tool.input_schema, complete=False))
        if tool.output_schema is not None:
            found.append(Root(f"{tool.name} result", tool.output_schema, complete=True))
    return found


def examples() -> list[tuple[str, int, object]]:
    return [
        (doc, line, example)
        for doc in DOCS
        for line, example in json_blocks((REPO_ROOT / doc).read_text())
    ]


@pytest.mark.parametrize(("doc", "line", "example"), examples(), ids=lambda value: str(value)[:40])
def test_every_example_is_what_the_tools_take_or_return(
    roots: list[Root], doc: str, line: int, example: object
) -> None:
    assert problems(example, roots) == [], f"{doc}:{line}"


def test_the_check_finds_a_missing_field(roots: list[Root]) -> None:
    """Not vacuous: a read result without its revision_sha256 fails, and so does a citation
    without sha256 and an unknown key; the same objects marked elided pass."""
    read = next(
        example for doc, _, example in examples()
        if isinstance(example, dict) and example.get("request_mode") == "read"
    )  # fmt: skip
    assert problems(read, roots) == []
    partial = {key: value for key, value in read.items() if key != "revision_sha256"}
    assert any("lacks revision_sha256" in p for p in problems(partial, roots))
    assert problems({**partial, "…": "…"}, roots) == []
    assert any("bogus not in the schema" in p for p in problems({**read, "bogus": 1}, roots))


def test_docs_list_is_real() -> None:
    for doc in DOCS:
        assert json_blocks((REPO_ROOT / doc).read_text()), doc
    assert Path(REPO_ROOT / "docs" / "tools.md").exists()
