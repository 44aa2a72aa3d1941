"""Command lists in `--help` that show each command's summary whole.

click cuts a command's summary to the width left beside its name and ends it with "..."
("Copy the knowledge base to DEST (a file, or a folder to put..."): a reader gets half a
sentence. `WholeSummaries` lists each command with the first sentence of its help, wrapped
onto as many lines as it needs.
"""

from __future__ import annotations

import click


def summary(command: click.Command) -> str:
    """The command's `short_help`, else the first sentence of its help (to the first ". " or
    the end of the first paragraph)."""
    if command.short_help:
        return command.short_help
    paragraph = (command.help or "").strip().split("\n\n", 1)[0]
    text = " ".join(paragraph.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


class WholeSummaries(click.Group):
    """A group whose `--help` lists its commands with whole summaries; its subgroups too."""

    group_class = type  # click: subgroups made with @group.group() get this class too

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, summary(command))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
