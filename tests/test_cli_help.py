"""`--help` reads as a person reads it: every command's summary whole in a group's list (click
cut them mid-sentence with "..."), and every example on a line of its own."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import click
import pytest

from kbmcp.cli import cli
from tests.cli_support import Run


def groups(group: click.Group = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from groups(command, (*path, name))


def every_command(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))


def commands_section(help_text: str) -> dict[str, str]:
    """A group's `Commands:` list as {name: summary}, wrapped lines joined."""
    section = help_text.split("\nCommands:\n", 1)[1]
    rows: dict[str, str] = {}
    name = ""
    for line in section.splitlines():
        match = re.match(r"^  (\S+)\s+(.*)$", line)
        if match:
            name = match.group(1)
            rows[name] = match.group(2)
        elif line.startswith("   ") and name:
            rows[name] += " " + line.strip()
    return rows


@pytest.mark.parametrize("path", list(groups()), ids=lambda path: " ".join(path) or "kbmcp")
def test_every_summary_is_whole(kbmcp: Callable[..., Run], path: tuple[str, ...]) -> None:
    rows = commands_section(kbmcp(*path, "--help").out)
    group = cli
    for name in path:
        group = group.commands[name]  # type: ignore[assignment]
    assert set(rows) == set(group.commands)  # type: ignore[attr-defined]
    for name, shown in rows.items():
        assert not shown.endswith("..."), shown
        first_line = " ".join((group.commands[name].help or "").split("\n\n")[0].split())  # type: ignore[attr-defined]
        assert first_line.startswith(shown), (shown, first_line)  # a whole sentence of it
        assert shown.endswith((".", ")")), shown


# A `kbmcp COMMAND` run into a line of prose (outside backticks): an example that lost its own
# line, e.g. "... while serving:  kbmcp serve --watch ./docs --watch-kb handbook A read-only".
RUN_IN = re.compile(r"(?<!^)\bkbmcp (?:" + "|".join(map(re.escape, cli.commands)) + r")\b")


@pytest.mark.parametrize("path", list(every_command()), ids=" ".join)
def test_examples_stand_on_lines_of_their_own(
    kbmcp: Callable[..., Run], path: tuple[str, ...]
) -> None:
    help_text = kbmcp(*path, "--help").out
    # Quoted commands (`kbmcp copy URL FILE.db`, wrapped over two lines or not) are prose.
    outside_backticks = re.sub(r"`[^`]*`", "``", help_text)
    for line in outside_backticks.splitlines():
        text = line.strip()
        if text.startswith(("Usage:", "kbmcp ")):
            continue
        assert not RUN_IN.search(text), line
