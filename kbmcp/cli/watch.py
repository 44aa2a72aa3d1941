"""`kbmcp watch`: keep a knowledge base in step with folders while they change."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbmcp.cli.common import Utf8Path, open_workspace
from kbmcp.cli.ingest_options import ingest_options

if TYPE_CHECKING:
    from kbmcp.service.ingest import IngestOptions, IngestReport


@click.command()
@click.argument("folders", nargs=-1, required=True, type=Utf8Path(path_type=Path))
@ingest_options
@click.pass_context
def watch(ctx: click.Context, folders: tuple[Path, ...], options: IngestOptions) -> None:
    """Index folders, then re-index them whenever files change, until Ctrl-C.

    \b
    Changed files get a new revision within about a second, new files are added, and removed
    (or newly ignored) files are archived, as `kbmcp add --prune` would. Editors' atomic saves
    and renames are handled. One line per sync that changed something.

    \b
    Example:
      kbmcp watch ./docs --kb handbook
    """
    from kbmcp.service.watch import (  # watchfiles: only when run
        changed,
        error_line,
        watch_paths,
    )

    first = True

    def report(result: IngestReport) -> None:
        nonlocal first
        if first or changed(result):
            stamp = time.strftime("%H:%M:%S")
            click.echo(f"{stamp} {result.summary_line()}")
            for error in result.errors:
                click.echo(f"{stamp} error: {error}", err=True)
        if first:
            click.echo(f"watching {', '.join(map(str, folders))} (Ctrl-C to stop)", err=True)
            first = False
        sys.stdout.flush()

    def failed(error: Exception) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} error: {error_line(error)}", err=True)

    # Ctrl-C is how a watch ends: a sync it interrupts rolls back whole batches.
    with open_workspace(ctx, create=True) as workspace, contextlib.suppress(KeyboardInterrupt):
        watch_paths(
            workspace,
            workspace.local_principal(),
            list(folders),
            options,
            on_report=report,
            on_error=failed,
        )
    click.echo("stopped watching", err=True)
