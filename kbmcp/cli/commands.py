"""`kbmcp add`, `ls`, `read`, `reembed`, `doctor`."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbmcp.cli.audit import audited
from kbmcp.cli.common import (
    Utf8Path,
    echo_json,
    open_workspace,
    pairs_option,
    printable,
)
from kbmcp.cli.doctor_lines import doctor_lines
from kbmcp.cli.ingest_options import ingest_options
from kbmcp.cli.progress import add_progress, chunk_progress
from kbmcp.search.limits import DEFAULT_LIMIT_CHARS, MAX_LIMIT_CHARS
from kbmcp.wording import counted

if TYPE_CHECKING:
    from kbmcp.service.ingest import IngestOptions
    from kbmcp.service.ingest_preview import IngestPreview


@click.command()
@click.argument("paths", nargs=-1, required=True, type=Utf8Path(path_type=Path))
@ingest_options
@click.option(
    "--tenant",
    "tenant_ref",
    default=None,
    help="Add to a knowledge base of this tenant (default: the local owner).",
)
@click.option(
    "--prune", is_flag=True, help="Archive documents whose files are gone from the added folders."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List what would be indexed and why each other file would not; write nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def add(
    ctx: click.Context,
    paths: tuple[Path, ...],
    options: IngestOptions,
    tenant_ref: str | None,
    prune: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Add files and folders to a knowledge base.

    \b
    Indexed by default: Markdown, reStructuredText, plain text, HTML and PDF. Skipped and
    counted by reason: hidden and .gitignore'd / .kbmcpignore'd paths, images (SVG too),
    binaries, lock files, minified assets, build output (node_modules, dist, ...), source code
    (unless --code). Unchanged files are skipped by content hash; changed files get a new
    revision.

    \b
    Examples:
      kbmcp add ./docs --kb handbook
      kbmcp add ./docs --exclude 'drafts/' --dry-run
      kbmcp add ./repo --include '*.md' --include '*.py'
    """
    # The ingest pipeline (parsers, the walker, the model) loads only when `add` runs.
    from kbmcp.service.ingest import add_paths
    from kbmcp.service.ingest_preview import preview_paths
    from kbmcp.service.tenants import act_as_tenant

    options = dataclasses.replace(options, prune=prune)
    if dry_run:
        _print_preview(preview_paths(list(paths), options), as_json)
        return
    with open_workspace(ctx, create=True) as workspace, add_progress("indexing") as progress:
        principal = workspace.local_principal()
        if tenant_ref is not None:
            principal = act_as_tenant(workspace, principal, tenant_ref)
        report = audited(
            workspace,
            principal,
            "add",
            lambda ws, who: add_paths(ws, who, list(paths), options, on_progress=progress),
            detail=lambda done: {
                "knowledge_base": done.knowledge_base,
                "added": done.added,
                "updated": done.updated,
                "archived": done.archived,
                "errors": len(done.errors),
            },
        )
    if as_json:
        echo_json(report.to_dict())
    else:
        for warning in report.warnings:
            click.echo(f"warning: {warning}", err=True)
        for error in report.errors:
            click.echo(f"error: {error}", err=True)
        click.echo(report.summary_line())
    if report.errors:
        sys.exit(1)


def _print_preview(preview: IngestPreview, as_json: bool) -> None:
    if as_json:
        echo_json(
            {
                "files": preview.files,
                "skipped": [{"path": path, "reason": reason} for path, reason in preview.skipped],
                "skipped_by_reason": preview.counts(),
                "errors": preview.errors,
            }
        )
    else:
        for file in preview.files:
            click.echo(
                f"index  {printable(file.path)}  ({file.kind}, {counted(file.chunks, 'chunk')})"
            )
        for path, reason in preview.skipped:
            click.echo(f"skip   {printable(path)}  ({reason})")
        for error in preview.errors:
            click.echo(f"error: {error}", err=True)
        click.echo(preview.summary_line())
    if preview.errors:
        sys.exit(1)


@click.command()
@click.argument("knowledge_bases", nargs=-1)
@click.option(
    "--all", "all_documents", is_flag=True, help="List the documents of every knowledge base."
)
@click.option(
    "--path", "path_prefix", default=None, help="Only documents whose path starts with this."
)
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Only documents with this tag."
)
@click.option("--archived", is_flag=True, help="Include archived documents.")
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 200),
    help="Documents per page.",
)
@click.option("--cursor", default=None, help="Continue a listing (printed as next_cursor).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def ls(
    ctx: click.Context,
    knowledge_bases: tuple[str, ...],
    all_documents: bool,
    path_prefix: str | None,
    tags: tuple[str, ...],
    archived: bool,
    limit: int,
    cursor: str | None,
    as_json: bool,
) -> None:
    """List knowledge bases, or the documents of the given ones (names or ids)."""
    from kbmcp.service.listing import list_documents, list_knowledge_bases, resolve_knowledge_bases

    with open_workspace(ctx) as workspace:
        principal = workspace.local_principal()
        if not knowledge_bases and not all_documents:
            kbs = list_knowledge_bases(workspace, principal)
            if as_json:  # the MCP tool's shape (and `ls KB --json`'s): an object, a named list
                echo_json({"knowledge_bases": kbs})
                return
            if not kbs:
                click.echo("no knowledge bases yet: add some files with `kbmcp add PATH`")
            for kb in kbs:
                click.echo(
                    f"{kb.knowledge_base_id}  {printable(kb.name)}  "
                    f"{counted(kb.document_count, 'document')}, {counted(kb.chunk_count, 'chunk')}"
                )
            return
        kb_ids = (
            resolve_knowledge_bases(workspace, principal, knowledge_bases)
            if knowledge_bases
            else None
        )
        page = list_documents(
            workspace,
            principal,
            knowledge_base_ids=kb_ids,
            path_prefix=path_prefix,
            tags=dict(pairs_option(tags, "--tag")),
            include_archived=archived,
            cursor=cursor,
            limit=limit,
        )
    if as_json:
        echo_json(page)
        return
    for doc in page.documents:
        status = "" if doc.status == "published" else f"  [{doc.status}]"
        # The title last: it may hold spaces, and every column before it is one word.
        click.echo(
            f"{doc.document_id}  {printable(doc.path)}  rev {doc.revision_number}  "
            f"{counted(doc.size_chars, 'char')}  {doc.updated_at}{status}  {printable(doc.title)}"
        )
    if page.next_cursor:
        click.echo(f"more: --cursor {page.next_cursor}")


@click.command()
@click.argument("document_id")
@click.option("--revision", "revision_id", default=None, help="A revision id (default: current).")
@click.option(
    "--offset",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="First character of the window.",
)
@click.option(
    "--limit-chars",
    default=DEFAULT_LIMIT_CHARS,
    show_default=True,
    type=click.IntRange(1, MAX_LIMIT_CHARS),
    help="Characters to print.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def read(
    ctx: click.Context,
    document_id: str,
    revision_id: str | None,
    offset: int,
    limit_chars: int,
    as_json: bool,
) -> None:
    """Print a window of a document's current (or given) revision."""
    from kbmcp.service.read import read_document

    with open_workspace(ctx) as workspace:
        window = read_document(
            workspace,
            workspace.local_principal(),
            document_id,
            revision_id=revision_id,
            offset=offset,
            limit_chars=limit_chars,
        )
    if as_json:  # as the MCP tool's read result: led by its request_mode
        echo_json({"request_mode": "read", **dataclasses.asdict(window)})
        return
    if not window.content:  # nothing to print: say why rather than print a blank line
        total = window.content_total_chars
        click.echo(
            "-- the document is empty (0 characters)"
            if total == 0
            else f"-- --offset {offset} is past the end: the document has "
            f"{counted(total, 'character')} (offsets 0 to {total - 1})",
            err=True,
        )
        return
    click.echo(window.content, nl=not window.content.endswith("\n"))
    if window.next_offset is not None:
        click.echo(
            f"-- {window.content_offset}..{window.next_offset} of {window.content_total_chars} "
            f"chars; continue with --offset {window.next_offset}",
            err=True,
        )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def reembed(ctx: click.Context, as_json: bool) -> None:
    """Re-embed every document with the configured model (after changing KBMCP_EMBEDDER)."""
    from kbmcp.service.admin import reembed as reembed_all

    with open_workspace(ctx) as workspace, chunk_progress("embedding") as progress:
        result = reembed_all(workspace, workspace.local_principal(), progress)
    if as_json:
        echo_json(result)
    else:
        click.echo(
            f"re-embedded {counted(result['chunks'], 'chunk')} with {result['model']['name']} "
            f"in {result['seconds']:.1f}s"
        )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Versions, database path, model status and counts (of an existing file: it creates none)."""
    from kbmcp.service.admin import doctor as doctor_report

    with open_workspace(ctx) as workspace:
        report = doctor_report(workspace, workspace.local_principal())
    if as_json:
        echo_json(report)
    else:
        for line in doctor_lines(report):
            click.echo(line)
        for warning in report["warnings"]:
            click.echo(f"warning: {warning}", err=True)
    if not report["model"]["ok"]:
        sys.exit(1)
