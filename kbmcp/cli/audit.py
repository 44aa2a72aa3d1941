"""`kbmcp audit`: read the audit trail; and `audited`, which records a CLI command's write in it
(kbmcp/service/audit.py says what is recorded and why)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kbmcp.cli.common import echo_json, open_workspace, printable

if TYPE_CHECKING:
    from kbmcp.access import Principal
    from kbmcp.service.audit import AuditEntry
    from kbmcp.workspace import Workspace

T = TypeVar("T")


def audited(
    workspace: Workspace,
    principal: Principal,
    action: str,
    call: Callable[[Workspace, Principal], T],
    *,
    given: Iterable[str] = (),
    touched: Callable[[T], Iterable[str]] | None = None,
    detail: Callable[[T], dict[str, Any]] | None = None,
) -> T:
    """Run a command's write and record it in the audit trail with its outcome: the public ids
    among `given` (the arguments) and those the result names (`touched`, by default the ids
    among the result's own fields), and what `detail` says of the result."""
    from kbmcp.service.audit import command_trail

    with command_trail(workspace).write(principal, action, given) as note:
        result = call(workspace, principal)
        note.objects.extend((touched or result_ids)(result))
        if detail is not None:
            note.detail.update(detail(result))
    return result


def record_on_database(db: str, action: str, outcome: str, detail: dict[str, Any]) -> None:
    """Record a command that writes a whole database (`copy`) in that database's trail, as no
    tenant's act (tenant 0). Never raises: the command's own answer stands."""
    import logging

    from kbmcp.config import load_settings
    from kbmcp.service.audit import command_trail
    from kbmcp.workspace import Workspace

    try:
        with Workspace(load_settings().with_db(db), create=False) as workspace:
            command_trail(workspace).record(None, action, outcome, detail=detail, tenant_id=0)
    except Exception as error:  # e.g. a destination that a failed copy never created
        logging.getLogger(__name__).info("audit trail of %s not written: %s", db, error)


def result_ids(result: Any) -> list[str]:
    """The public ids among a result's fields (one level: a string or a list of strings)."""
    from kbmcp.service.audit import ids_in

    if not dataclasses.is_dataclass(result):
        return []
    return ids_in(getattr(result, f.name) for f in dataclasses.fields(result))


@click.command("audit")
@click.option(
    "--since",
    default=None,
    metavar="WHEN",
    help="Only events at or after WHEN: an ISO 8601 date or date-time, or an age such as 30m, "
    "24h or 7d.",
)
@click.option("--token", "token_id", default=None, metavar="TOKEN_ID", help="Only this token.")
@click.option("--tenant", "tenant_ref", default=None, help="Only this tenant (name or id).")
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Show the newest this many events.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@click.pass_context
def audit(
    ctx: click.Context,
    since: str | None,
    token_id: str | None,
    tenant_ref: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Show the audit trail: writes, refused requests and search counts, oldest first.

    Each line: time, via (cli, stdio, http), tenant, token (or 'operator'), the tool or
    command, its outcome (ok or an error code) and the ids it touched; searches are counted per
    token ("x12"). Query texts appear only with KBMCP_AUDIT_QUERIES=1. Rows older than
    KBMCP_AUDIT_RETENTION_DAYS (default 90; 0 keeps them) are deleted.

    \b
    Examples:
      kbmcp audit --since 24h
      kbmcp audit --token tok_0123456789abcdef --json
    """
    from kbmcp.service.audit import parse_since, read_trail

    since_at = None if since is None else parse_since(since)  # a bad value before anything opens
    with open_workspace(ctx) as workspace:
        entries = read_trail(
            workspace,
            workspace.local_principal(),
            since=since_at,
            token_id=token_id,
            tenant=tenant_ref,
            limit=limit,
        )
    if as_json:
        echo_json({"events": entries})
        return
    if not entries:
        click.echo("no audit events" + ("" if since is None else f" since {since}"))
    for entry in entries:
        click.echo(_line(entry))


def _line(entry: AuditEntry) -> str:
    who = entry.token_id or "operator"
    tenant = printable(entry.tenant) if entry.tenant is not None else "-"
    times = f" x{entry.count}" if entry.count > 1 else ""
    objects = f"  {' '.join(entry.objects)}" if entry.objects else ""
    detail = ""
    if entry.detail:
        detail = "  " + printable(
            " ".join(f"{key}={value}" for key, value in sorted(entry.detail.items()))
        )
    return (
        f"{entry.at}  {entry.via}  {tenant}  {who}  {entry.action}{times}  {entry.outcome}"
        f"{objects}{detail}"
    )
