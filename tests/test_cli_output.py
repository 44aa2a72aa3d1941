"""What the CLI prints for people and for programs: lines in words (no Python reprs, nothing a
document can use to act on the terminal), counts that agree with their nouns, JSON shaped like
the MCP tools' results, help text on every option, and `--kb` taking a knowledge base's id."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from kbmcp.cli import cli
from kbmcp.cli.common import printable
from kbmcp.wording import counted, plural
from tests.cli_support import Run, assert_one_line_error
from tests.mcp_support import connect, write

Kbmcp = Callable[..., Run]


@pytest.fixture
def db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Path | str:
    if backend == "postgres":
        return str(request.getfixturevalue("new_postgres_url"))
    return tmp_path / "kb.db"


def every_command() -> Iterator[tuple[str, click.Command]]:
    def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    return walk(cli, "kbmcp")


def test_every_option_has_help_text() -> None:
    undocumented = [
        f"{path} {'/'.join(param.opts)}"
        for path, command in every_command()
        for param in command.params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert undocumented == []


def test_counted_nouns_agree() -> None:
    assert [counted(n, "document") for n in (0, 1, 2)] == [
        "0 documents",
        "1 document",
        "2 documents",
    ]
    assert (counted(1, "memory"), counted(3, "memory")) == ("1 memory", "3 memories")
    assert plural("knowledge base") == "knowledge bases" and plural("key") == "keys"


def test_printable_shows_text_as_it_reads_and_escapes_what_would_act() -> None:
    assert printable('Bob\'s "quoted" notes') == 'Bob\'s "quoted" notes'
    assert printable("café 👩‍💻 naïve") == "café 👩‍💻 naïve"
    assert printable("red\x1b[31m title\r") == "red\\x1b[31m title\\r"
    assert printable("one\ntwo\u2028three") == "one\\ntwo\\u2028three"
    assert printable("abc\u202edcba") == "abc\\u202edcba"  # a right-to-left override


def test_lines_print_names_and_titles_as_they_read(kbmcp: Kbmcp, db: Path, tmp_path: Path) -> None:
    source = write(
        tmp_path / "src",
        {
            "quoted.md": '---\ntitle: Bob\'s "quoted" notes\n---\nOne line.\n',
            "hostile.md": '---\ntitle: "Clear\\e[2J screen"\n---\nAnother line.\n',
        },
    )
    added = kbmcp("--db", db, "add", source, "--kb", "Bob's notes")
    assert added.code == 0, added.err
    assert added.out.startswith("Bob's notes: added 2, ")
    assert "; 2 chunks indexed (2 embedded)" in added.out
    kbs = kbmcp("--db", db, "ls").out.splitlines()
    assert len(kbs) == 1 and kbs[0].endswith("  Bob's notes  2 documents, 2 chunks")
    docs = kbmcp("--db", db, "ls", "Bob's notes").out
    assert "  rev 1  " in docs and docs.count("\n") == 2
    lines = dict(line.split("  ", 2)[1:] for line in docs.splitlines())
    assert lines["quoted.md"].endswith('Z  Bob\'s "quoted" notes')
    assert lines["hostile.md"].endswith("Z  Clear\\x1b[2J screen")
    assert "\x1b" not in docs and "'Bob" not in docs


def test_counts_in_lines_agree_with_their_nouns(kbmcp: Kbmcp, db: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "src", {"one.md": "# One\n\nA single short chunk.\n"})
    added = kbmcp("--db", db, "add", source, "--kb", "solo")
    assert "; 1 chunk indexed (1 embedded)" in added.out
    assert kbmcp("--db", db, "ls").out.rstrip().endswith("  solo  1 document, 1 chunk")
    chars = len("# One\n\nA single short chunk.\n")
    assert f"  rev 1  {chars} chars  " in kbmcp("--db", db, "ls", "solo").out
    tenants = kbmcp("--db", db, "tenant", "list").out
    assert "  local  1 knowledge base, 0 active tokens" in tenants
    assert "re-embedded 1 chunk with hashing" in kbmcp("--db", db, "reembed").out
    kbmcp("--db", db, "memory", "store", "create", "ops")
    kbmcp("--db", db, "remember", "Deploys freeze on Fridays", "--store", "ops")
    assert "  ops  1 memory" in kbmcp("--db", db, "memory", "store", "list").out
    preview = kbmcp("add", source, "--dry-run").out
    assert "(markdown, 1 chunk)" in preview and "would index 1 file (1 chunk)" in preview


@pytest.mark.anyio
async def test_ls_json_has_the_shape_of_ls_kb_json_and_of_the_mcp_tool(
    kbmcp: Kbmcp, db: Path, tmp_path: Path
) -> None:
    source = write(tmp_path / "src", {"a.md": "# A\n\nText.\n"})
    kbmcp("--db", db, "add", source, "--kb", "notes")
    kbs = kbmcp("--db", db, "ls", "--json").json()
    documents = kbmcp("--db", db, "ls", "notes", "--json").json()
    assert isinstance(kbs, dict) and list(kbs) == ["knowledge_bases"]
    assert isinstance(documents, dict) and isinstance(documents["documents"], list)
    async with connect("inprocess", db) as client:
        listed = await client.call_tool("list_knowledge_bases", {})
    assert kbs == listed.structured_content


# ------------------------------------------------------------------ --kb: a name or an id


def test_add_kb_takes_an_id_of_the_tenants_knowledge_base(
    kbmcp: Kbmcp, db: Path, tmp_path: Path
) -> None:
    first = write(tmp_path / "first", {"a.md": "# A\n\nAlpha.\n"})
    second = write(tmp_path / "second", {"b.md": "# B\n\nBeta.\n"})
    kb_id = kbmcp("--db", db, "add", first, "--kb", "notes", "--json").json()["knowledge_base_id"]
    by_id = kbmcp("--db", db, "add", second, "--kb", kb_id, "--json")
    assert by_id.code == 0, by_id.err
    assert by_id.json()["knowledge_base_id"] == kb_id and by_id.json()["knowledge_base"] == "notes"
    listed = kbmcp("--db", db, "ls", "--json").json()["knowledge_bases"]
    assert [(kb["name"], kb["document_count"]) for kb in listed] == [("notes", 2)]


def test_add_kb_with_another_tenants_id_creates_nothing(
    kbmcp: Kbmcp, db: Path, tmp_path: Path
) -> None:
    """The bug: `add DIR --kb kb_…` (another tenant's) made a local knowledge base *named* kb_…"""
    kbmcp("--db", db, "tenant", "create", "acme")
    theirs = kbmcp("--db", db, "kb", "create", "ops", "--tenant", "acme", "--json").json()
    kb_id = theirs["knowledge_base_id"]
    source = write(tmp_path / "src", {"a.md": "# A\n\nAlpha.\n"})
    refused = kbmcp("--db", db, "add", source, "--kb", kb_id)
    assert_one_line_error(refused, f"no knowledge base of this tenant has id {kb_id}", "--tenant")
    assert kbmcp("--db", db, "ls", "--json").json() == {"knowledge_bases": []}
    unknown = kbmcp("--db", db, "add", source, "--kb", "kb_0123456789abcdef")
    assert_one_line_error(unknown, "no knowledge base of this tenant has id kb_0123456789abcdef")
    assert kbmcp("--db", db, "ls", "--json").json() == {"knowledge_bases": []}
    # As the owning tenant, the id names its knowledge base.
    added = kbmcp("--db", db, "add", source, "--kb", kb_id, "--tenant", "acme", "--json")
    assert added.code == 0 and added.json()["knowledge_base_id"] == kb_id


@pytest.mark.parametrize(
    "args",
    [
        ["kb", "create", "kb_0123456789abcdef"],
        ["kb", "create", "doc_0123456789abcdef"],
        ["memory", "store", "create", "mst_0123456789abcdef"],
    ],
    ids=["kb-id", "doc-id", "store-id"],
)
def test_a_new_name_shaped_like_an_id_is_refused(kbmcp: Kbmcp, db: Path, args: list[str]) -> None:
    refused = kbmcp("--db", db, *args)
    assert_one_line_error(refused, "looks like an id, not a name")
    assert kbmcp("--db", db, "kb", "list", "--json").json() == []
    assert kbmcp("--db", db, "memory", "store", "list", "--json").json() == []


def test_names_that_only_resemble_ids_are_fine(kbmcp: Kbmcp, db: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "src", {"a.md": "# A\n\nAlpha.\n"})
    for name in ("kb_notes", "kb_0123", "KB_0123456789ABCDEF", "xyz_0123456789abcdef"):
        assert kbmcp("--db", db, "add", source, "--kb", name).code == 0, name
