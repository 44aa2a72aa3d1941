"""`kbmcp export` and `kbmcp import`: knowledge bases as a JSONL file a person can read, grep,
diff and keep in git (docs/export-format.md; kbmcp/service/export.py and import_jsonl.py)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import click

from kbmcp.cli.common import Utf8Path, echo_json, open_workspace
from kbmcp.wording import counted


@click.command("export")
@click.option(
    "--kb",
    "stores",
    multiple=True,
    metavar="NAME_OR_ID",
    help="Export this knowledge base or memory store (repeatable; default: all).",
)
@click.option(
    "--with-vectors",
    is_flag=True,
    help="Include each current chunk's vector and the model's fingerprint (an import with the "
    "same model then embeds nothing).",
)
@click.option(
    "--with-tenants",
    is_flag=True,
    help="Include the tenants and the shares of the exported knowledge bases (never tokens).",
)
@click.option(
    "-o",
    "--output",
    type=Utf8Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of stdout.",
)
@click.pass_context
def export_command(
    ctx: click.Context,
    stores: tuple[str, ...],
    with_vectors: bool,
    with_tenants: bool,
    output: Path | None,
) -> None:
    """Export knowledge bases and memory stores as JSON Lines, to stdout.

    One object per line: knowledge bases, documents with every revision's text, tags and
    metadata, memories; optionally vectors, tenants and shares. Never token secrets. The same
    data always exports to the same bytes. Progress goes to stderr.

    \b
    Examples:
      kbmcp export > kb.jsonl
      kbmcp export --kb handbook --with-vectors -o handbook.jsonl
    """
    from kbmcp.access import operator_principal
    from kbmcp.service.export import export_jsonl

    if output is None and sys.stdout.isatty():
        raise click.UsageError("stdout is a terminal: redirect it (> kb.jsonl) or pass -o FILE")
    target = output.open("wb") if output is not None else sys.stdout.buffer
    try:
        with open_workspace(ctx) as workspace:
            export_jsonl(
                workspace,
                operator_principal(),
                lambda line: target.write(line.encode("utf-8")),
                stores=stores,
                with_vectors=with_vectors,
                with_tenants=with_tenants,
                progress=lambda line: click.echo(line, err=True),
            )
    finally:
        target.flush()
        if output is not None:
            target.close()


@click.command("import")
@click.argument("file", type=Utf8Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option(
    "--new-ids",
    is_flag=True,
    help="Give every imported row a new id (to import into a database that already holds "
    "some of the file's ids, e.g. a second copy).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def import_command(ctx: click.Context, file: Path, new_ids: bool, as_json: bool) -> None:
    """Import a `kbmcp export` file (FILE, or - for stdin) into the database.

    Every line is checked before anything is written (a bad line stops the import, naming
    it); then the chunks without a vector from the same model are embedded, and everything is
    written in one transaction. Ids and times are kept (or new with --new-ids); a knowledge
    base whose name its tenant already uses is refused.

    \b
    Examples:
      kbmcp --db restored.db import kb.jsonl
      kbmcp --db postgresql://kbmcp@db.internal/kbmcp import kb.jsonl --new-ids
    """
    from kbmcp.access import operator_principal
    from kbmcp.cli.audit import audited
    from kbmcp.service.import_jsonl import import_jsonl

    new_file = _new_file(ctx)
    try:
        with _seekable(file) as path, open_workspace(ctx, create=True) as workspace:
            report = audited(
                workspace,
                operator_principal(),  # (no tenant: the file brings its own, 'local' too)
                "import",
                lambda ws, admin: import_jsonl(
                    ws,
                    admin,
                    path,
                    new_ids=new_ids,
                    progress=lambda line: click.echo(line, err=True),
                ),
                touched=lambda done: done.stores,
                detail=lambda done: {"file": str(file), **dict(sorted(done.counts.items()))},
            )
    except BaseException:
        if new_file is not None:  # a failed import into a new file leaves no file behind
            for suffix in ("", "-wal", "-shm"):
                Path(f"{new_file}{suffix}").unlink(missing_ok=True)
        raise
    if as_json:
        echo_json(report)
        return
    counts = report.counts
    click.echo(
        f"imported {counted(counts['knowledge_base'], 'knowledge base')}, "
        f"{counted(counts['memory_store'], 'memory store')}, "
        f"{counted(counts['document'], 'document')}, {counted(counts['memory'], 'memory')}, "
        f"{counted(counts['revision'], 'revision')} "
        f"({report.vectors_used} vectors from the file, {report.embedded} embedded) "
        f"in {report.seconds:.1f}s"
    )


def _new_file(ctx: click.Context) -> Path | None:
    """The --db file when it does not exist yet (None for one that does, or PostgreSQL)."""
    from kbmcp.config import load_settings

    settings = load_settings().with_db(ctx.find_root().obj.get("db"))
    if settings.is_postgres or settings.db_path.exists():
        return None
    return settings.db_path


class _seekable:
    """The import reads its file three times: stdin ('-') is copied to a temporary file."""

    def __init__(self, file: Path) -> None:
        self._file = file
        self._temporary: tempfile._TemporaryFileWrapper[bytes] | None = None

    def __enter__(self) -> Path:
        if str(self._file) != "-":
            if not self._file.is_file():
                raise click.BadParameter(f"{self._file}: no such file", param_hint="FILE")
            return self._file
        self._temporary = tempfile.NamedTemporaryFile(suffix=".jsonl")
        shutil.copyfileobj(sys.stdin.buffer, self._temporary)
        self._temporary.flush()
        return Path(self._temporary.name)

    def __exit__(self, *exc: object) -> None:
        if self._temporary is not None:
            self._temporary.close()
