"""`kbmcp backup DEST`: a consistent copy of the knowledge base while it is in use."""

from __future__ import annotations

import click

from kbmcp.cli.common import echo_json, open_workspace
from kbmcp.wording import counted


@click.command()
# Kept as typed: a trailing slash says DEST is a folder, and a Path would drop it.
@click.argument("destination", type=click.Path())
@click.option("--force", is_flag=True, help="Replace DEST if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def backup(ctx: click.Context, destination: str, force: bool, as_json: bool) -> None:
    """Copy the knowledge base to DEST (a file, or a folder to put it in).

    Uses SQLite's online backup API: safe while `kbmcp serve` and `kbmcp add` use the file.
    The copy is a single file (no -wal), checked with PRAGMA integrity_check.
    A PostgreSQL database: use pg_dump, or `kbmcp copy URL FILE.db`.

    \b
    Example:
      kbmcp backup ~/backups/kbmcp-$(date +%F).db
    """
    from kbmcp.service.backup import backup as run_backup

    with open_workspace(ctx) as workspace:
        report = run_backup(workspace, destination, overwrite=force)
    if as_json:
        echo_json(report)
    else:
        click.echo(
            f"backed up {report.source} to {report.destination} "
            f"({report.bytes / 1e6:.1f} MB, {counted(report.pages, 'page')}) "
            f"in {report.seconds:.1f}s; "
            "integrity check ok"
        )
