"""The `kbmcp` command line: a thin adapter over the service layer (no SQL here)."""

from __future__ import annotations

import os
import sys
import traceback

import click

from kbmcp import __version__
from kbmcp.cli.accounts import kb, tenant, token
from kbmcp.cli.audit import audit
from kbmcp.cli.backup import backup
from kbmcp.cli.commands import add, doctor, ls, read, reembed
from kbmcp.cli.common import Utf8Path
from kbmcp.cli.connect import connect, disconnect
from kbmcp.cli.copy import copy_command
from kbmcp.cli.eval import eval_command
from kbmcp.cli.flags import error_line
from kbmcp.cli.memory import forget, memory, remember
from kbmcp.cli.search import search
from kbmcp.cli.serve import serve
from kbmcp.cli.summaries import WholeSummaries
from kbmcp.cli.transfer import export_command, import_command
from kbmcp.cli.watch import watch
from kbmcp.errors import KbError


@click.group(cls=WholeSummaries, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=Utf8Path(dir_okay=False),
    default=None,
    help="The knowledge-base file (default: $KBMCP_DB, else the user data dir).",
)
@click.option(
    "--immutable",
    is_flag=True,
    help="The file is frozen (nobody writes it while kbmcp runs): read it without locking, "
    "e.g. a shipped WAL-mode file on a read-only medium (also $KBMCP_IMMUTABLE=1).",
)
@click.version_option(__version__, prog_name="kbmcp")
@click.pass_context
def cli(ctx: click.Context, db: str | None, immutable: bool) -> None:
    """kbmcp: a local-first knowledge base for AI agents, in one SQLite file, served over MCP.

    \b
    Typical use:
      kbmcp add ./docs --kb handbook      # ingest files (again: only changes are re-indexed)
      kbmcp search "how do I rotate keys" # hybrid keyword + semantic search
      kbmcp remember "Deploys freeze on Fridays" --tag topic=deploy  # a memory
      kbmcp serve                         # MCP over stdio for desktop agents
      kbmcp watch ./docs --kb handbook    # keep a knowledge base in step with a folder
      kbmcp backup ~/kbmcp-backup.db      # a consistent copy, safe while in use
    """
    ctx.obj = {"db": db, "immutable": immutable}


for command in (
    add,
    ls,
    read,
    search,
    serve,
    watch,
    reembed,
    doctor,
    backup,
    copy_command,
    export_command,
    import_command,
    eval_command,
    remember,
    forget,
    memory,
    tenant,
    kb,
    token,
    audit,
    connect,
    disconnect,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors, KbError and other failures become one line on stderr and a
    non-zero exit: 2 for usage errors (click's, and a service's refusal of a flag's value,
    named as the flag: kbmcp/cli/flags.py), 1 otherwise."""
    try:
        cli.main(args=argv, prog_name="kbmcp", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()  # `kbmcp` alone prints the help
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"error: {exc.format_message()}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except KbError as exc:
        line, status = error_line(exc)  # the service's argument names as the CLI's flags
        click.echo(line, err=True)
        sys.exit(status)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("KBMCP_DEBUG"):
            traceback.print_exc()
        click.echo(
            f"error: unexpected {type(exc).__name__}: {exc} (set KBMCP_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(1)
