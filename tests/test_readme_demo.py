"""The README's demo, run as written with the default model: its search's first result is the
passage that answers the question (how to limit a search to one document: `--doc`,
`document_ids`).

What it depends on: docs/search.md's section "Limit a search to one document", one passage
that names `--doc` and `document_ids` (moved to tools.md or cli.md, it still counts). The
question is worded as a task, not as "how do I ...": the keyword channel has no stop words,
and "how", "do", "I" are rare in reference docs, so a page whose example query starts with
them (tools.md's include_content example) ranked first for any question starting with them,
above the answer (docs/retrieval-quality.md). With the task wording the semantic channel ranks
the answer first and the keyword channel high: hybrid score 0.95; next search.md's Scope
section (which names `document_ids` too) 0.82 and the first passage that does not answer 0.80
(measured). A new passage about limiting searches that names neither would displace it."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import Run
from tests.test_readme import README, REPO_ROOT, shell_blocks

# What answers "limit a search to one document": the document filter, as the CLI option
# (`--doc`) or the MCP argument (`document_ids`, alias `knowledge_ids`).
ANSWER_WORDS = ("--doc", "document_ids", "knowledge_ids")
ANSWER_WITHIN = 1  # the first result, not one of the first few


def demo_commands() -> list[list[str]]:
    """The `kbmcp` invocations of the README's first command, as argument lists."""
    first_command = shell_blocks(README.read_text())[0].strip().splitlines()[0]
    commands = []
    for step in first_command.split("&&"):
        words = shlex.split(step)
        if words and Path(words[0]).name == "kbmcp":
            commands.append(words[1:])
    return commands


def test_the_demo_adds_the_docs_then_searches() -> None:
    add, search = demo_commands()
    assert add[:3] == ["--db", "demo.db", "add"] and "docs" in add
    assert search[:3] == ["--db", "demo.db", "search"]


def test_the_readme_demo_search_answers_its_question(
    kbmcp: Callable[..., Run], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBMCP_EMBEDDER", "minilm")
    monkeypatch.chdir(REPO_ROOT)
    db = tmp_path / "demo.db"
    add, search = (["--db", str(db), *words[2:]] for words in demo_commands())
    assert kbmcp(*add).code == 0
    found = kbmcp(*search, "--json")
    assert found.code == 0, found.err
    results = found.json()["results"]  # type: ignore[index]
    # Not the README's own line: a page holding the question word for word is its best match.
    assert "README.md" not in {r["path"] for r in results}
    passages = [_passage(kbmcp, db, result) for result in results[:ANSWER_WITHIN]]
    answering = [i for i, text in enumerate(passages) if any(w in text for w in ANSWER_WORDS)]
    assert answering, [(r["path"], r["heading_path"][-1]) for r in results[:ANSWER_WITHIN]]
    assert results[answering[0]]["path"] in {"search.md", "tools.md", "cli.md"}


def _passage(kbmcp: Callable[..., Run], db: Path, result: dict) -> str:
    """The full text of a result's passage (its citation's character range)."""
    start, end = result["citation"]["char_start"], result["citation"]["char_end"]
    window = kbmcp("--db", db, "read", result["document_id"], "--offset", start,
                   "--limit-chars", end - start, "--json")  # fmt: skip
    return window.json()["content"]  # type: ignore[index,no-any-return]
