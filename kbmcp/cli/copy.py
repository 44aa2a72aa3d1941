"""`kbmcp copy SRC DST`: move a knowledge base between a file and PostgreSQL (or either to its own
kind), every id unchanged (kbmcp/store/copy.py)."""

from __future__ import annotations

import click

from kbmcp.cli.common import Utf8Text, echo_json
from kbmcp.cli.doctor_lines import contents
from kbmcp.wording import counted


@click.command("copy")
@click.argument("source", type=Utf8Text())
@click.argument("destination", type=Utf8Text())
@click.option("--force", is_flag=True, help="Replace everything in a DST that is not empty.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def copy_command(source: str, destination: str, force: bool, as_json: bool) -> None:
    """Copy everything from SRC to DST, each a file or a postgresql:// URL.

    Knowledge bases, memory stores, documents with every revision, chunks and their vectors (not
    re-embedded), tenants, shares, tokens and the id key, every id unchanged; the search indexes
    are rebuilt at DST. DST is written in one transaction and every table's rows are counted on
    both sides at the end. A DST that already holds a knowledge base is refused without --force.

    \b
    Examples:
      kbmcp copy kb.db postgresql://kbmcp@db.internal/kbmcp
      kbmcp copy postgresql://kbmcp@db.internal/kbmcp restored.db
    """
    from kbmcp.cli.audit import record_on_database
    from kbmcp.errors import KbError
    from kbmcp.store.copy import copy_store

    try:
        report = copy_store(
            source,
            destination,
            force=force,
            progress=lambda line: click.echo(f"  {line}", err=True),
        )
    except KbError as error:  # recorded where the copy would have gone (left as it was)
        record_on_database(destination, "copy", error.code, {"source": _shown(source)})
        raise
    record_on_database(destination, "copy", "ok", {"source": report.source, "rows": report.rows})
    if as_json:
        echo_json(report)
        return
    rows = report.rows
    # The contents in doctor's words and numbers (`kbmcp --db DST doctor` says the same).
    click.echo(
        f"copied {report.source} to {report.destination}: {contents(report.contents)}; "
        f"{counted(rows.get('tenant', 0), 'tenant')}, {counted(rows.get('token', 0), 'token')}; "
        f"counts verified, in {report.seconds:.1f}s"
    )


def _shown(target: str) -> str:
    """A database as messages show it (a URL without its password: never a secret)."""
    from kbmcp.store.postgres.url import is_postgres_url, shown_url

    return shown_url(target) if is_postgres_url(target) else target
