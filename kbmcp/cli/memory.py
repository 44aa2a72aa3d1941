"""`kbmcp remember`, `kbmcp forget` and `kbmcp memory`: memories from the command line.

The same service functions as the MCP tools `remember` and `forget` (kbmcp/service/memories.py).
Stores are named by name or id (mst_...); `--tenant` acts for another tenant of the file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import click

from kbmcp.cli.audit import audited
from kbmcp.cli.common import UTF8_TEXT, open_workspace, pairs_option, print_result, printable
from kbmcp.cli.summaries import WholeSummaries
from kbmcp.errors import InvalidRequest
from kbmcp.memory_defaults import DEFAULT_LIST, DEFAULT_MEMORY_STORE, MAX_LIST
from kbmcp.tags import tag_pairs
from kbmcp.wording import counted

if TYPE_CHECKING:  # the service layer loads when a command runs, not for --help
    from kbmcp.access import Principal
    from kbmcp.service.memories import MemoryInfo
    from kbmcp.workspace import Workspace

T = TypeVar("T")

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
TENANT_OPTION = click.option(
    "--tenant",
    "tenant_ref",
    default=None,
    help="Act for this tenant (default: the local owner).",
)
TAG_OPTION = click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="KEY=VALUE",
    help="A tag (repeatable), e.g. --tag topic=deploy.",
)
PREVIEW_CHARS = 100


@click.command()
@click.argument("text", type=UTF8_TEXT)
@click.option(
    "--store",
    default=None,
    help=f"Memory store name or id (default: '{DEFAULT_MEMORY_STORE}', created on first use).",
)
@TAG_OPTION
@click.option("--source", default=None, type=UTF8_TEXT, help="Where the fact comes from.")
@click.option(
    "--replace",
    "memory_id",
    default=None,
    metavar="MEMORY_ID",
    help="Replace this memory's text instead (a new revision under the same id).",
)
@TENANT_OPTION
@JSON_OPTION
@click.pass_context
def remember(
    ctx: click.Context,
    text: str,
    store: str | None,
    tags: tuple[str, ...],
    source: str | None,
    memory_id: str | None,
    tenant_ref: str | None,
    as_json: bool,
) -> None:
    """Remember TEXT as a memory ('-' reads it from stdin).

    \b
    Example:
      kbmcp remember "The deploy key rotates monthly" --tag topic=deploy
    The same text in the same store is one memory: its id is printed again.
    Correct a fact with --replace MEMORY_ID (same id, a new revision).
    """
    from kbmcp.service import memories

    content = sys.stdin.read() if text == "-" else text
    tag_map = _tag_map(tags)
    _run(
        ctx,
        as_json,
        tenant_ref,
        lambda ws, who: memories.remember(
            ws,
            who,
            content,
            # --store takes a name or an id; the service takes ids only, as the MCP tool does.
            memory_store_id=memories.resolve_memory_stores(ws, who, [store])[0] if store else None,
            tags=tag_map,
            source=source,
            memory_id=memory_id,
        ),
        lambda r: f"{r.outcome} {r.memory_id} in {printable(r.memory_store)} ({r.memory_store_id})",
        create=True,
        action="remember",
        given=[memory_id or ""],
    )


@click.command()
@click.argument("memory_id")
@TENANT_OPTION
@JSON_OPTION
@click.pass_context
def forget(ctx: click.Context, memory_id: str, tenant_ref: str | None, as_json: bool) -> None:
    """Forget a memory: gone from search at once, kept for audit (`memory list --all`)."""
    from kbmcp.service import memories

    _run(
        ctx,
        as_json,
        tenant_ref,
        lambda ws, who: memories.forget(ws, who, memory_id),
        lambda r: f"{r.outcome.replace('_', ' ')} {r.memory_id} at {r.forgotten_at}",
        action="forget",
        given=[memory_id],
    )


@click.group(cls=WholeSummaries)
def memory() -> None:
    """Memories: facts agents (or you) remember, searched together with documents."""


@memory.command("list")
@click.option("--store", default=None, help="Only this memory store (name or id).")
@click.option("--all", "include_forgotten", is_flag=True, help="Include forgotten memories.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIST),
    default=DEFAULT_LIST,
    show_default=True,
    help="Memories to list.",
)
@TENANT_OPTION
@JSON_OPTION
@click.pass_context
def memory_list(
    ctx: click.Context,
    store: str | None,
    include_forgotten: bool,
    limit: int,
    tenant_ref: str | None,
    as_json: bool,
) -> None:
    """List memories, most recently updated first."""
    from kbmcp.service import memories

    _run(
        ctx,
        as_json,
        tenant_ref,
        lambda ws, who: memories.list_memories(
            ws, who, memory_store=store, include_forgotten=include_forgotten, limit=limit
        ),
        lambda items: [_memory_line(item) for item in items] or ["no memories"],
    )


@memory.group("store")
def store_group() -> None:
    """Memory stores: named, tagged containers of memories."""


@store_group.command("create")
@click.argument("name", type=UTF8_TEXT)
@TAG_OPTION
@TENANT_OPTION
@JSON_OPTION
@click.pass_context
def store_create(
    ctx: click.Context, name: str, tags: tuple[str, ...], tenant_ref: str | None, as_json: bool
) -> None:
    """Create a memory store; its tags match every memory in it in tag filters."""
    from kbmcp.service import memories

    tag_map = _tag_map(tags)
    _run(
        ctx,
        as_json,
        tenant_ref,
        lambda ws, who: memories.create_memory_store(ws, who, name, tags=tag_map),
        lambda s: f"created memory store {printable(s.name)} ({s.memory_store_id})",
        create=True,
        action="memory store create",
    )


@store_group.command("list")
@TENANT_OPTION
@JSON_OPTION
@click.pass_context
def store_list(ctx: click.Context, tenant_ref: str | None, as_json: bool) -> None:
    """List memory stores with their tags and memory counts."""
    from kbmcp.service import memories

    _run(
        ctx,
        as_json,
        tenant_ref,
        memories.list_memory_stores,
        lambda stores: (
            [
                f"{s.memory_store_id}  {printable(s.name)}  {counted(s.memory_count, 'memory')}"
                + (f"  tags {_tags_text(s.tags.items())}" if s.tags else "")
                for s in stores
            ]
            or ["no memory stores"]
        ),
    )


def _run(
    ctx: click.Context,
    as_json: bool,
    tenant_ref: str | None,
    call: Callable[[Workspace, Principal], T],
    render: Callable[[T], str | list[str]],
    *,
    create: bool = False,
    action: str | None = None,
    given: Iterable[str] = (),
) -> None:
    """One service call as the local owner (or `--tenant`); print JSON or lines. A call that
    writes names its `action`: it is recorded in the audit trail."""
    from kbmcp.service.tenants import act_as_tenant

    with open_workspace(ctx, create=create) as workspace:
        principal = workspace.local_principal()
        if tenant_ref is not None:
            principal = act_as_tenant(workspace, principal, tenant_ref)
        if action is None:
            result = call(workspace, principal)
        else:
            result = audited(workspace, principal, action, call, given=given)
    print_result(result, as_json, render)


def _tag_map(tags: tuple[str, ...]) -> dict[str, str]:
    pairs = pairs_option(tags, "--tag")
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise InvalidRequest(
            f"--tag: a memory's tag has one value per key; repeated: {', '.join(repeated)}",
            details={"argument": "--tag"},
        )
    return dict(pairs)


def _tags_text(pairs: Iterable[tuple[str, str]]) -> str:
    return printable(",".join(f"{key}={value}" for key, value in pairs))


def _memory_line(item: MemoryInfo) -> str:
    text = " ".join(item.content.split())
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    status = "" if item.status == "published" else " [forgotten]"
    tags = f"  [{_tags_text(tag_pairs(item.tags))}]" if item.tags else ""
    return (
        f"{item.memory_id}  {printable(item.memory_store)}  {item.updated_at}{status}{tags}  "
        f"{printable(preview)}"
    )
