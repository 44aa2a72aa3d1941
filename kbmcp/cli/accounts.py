"""`kbmcp tenant`, `kbmcp kb` and `kbmcp token`: who may read what (the local operator's tools).

Each command prints one line per item, or JSON with --json. `token create` prints the secret
once; it is not stored and cannot be shown again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kbmcp.cli.audit import audited
from kbmcp.cli.common import echo_json, open_workspace, print_result, printable
from kbmcp.cli.summaries import WholeSummaries
from kbmcp.scopes import MAX_EXPIRY_DAYS, TOKEN_SCOPES
from kbmcp.wording import counted

if TYPE_CHECKING:  # the service layer loads when a command runs, not for --help
    from kbmcp.access import Principal
    from kbmcp.service.tenants import KnowledgeBaseRecord
    from kbmcp.service.tokens import TokenInfo
    from kbmcp.workspace import Workspace

T = TypeVar("T")

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.group(cls=WholeSummaries)
def tenant() -> None:
    """Tenants: who owns knowledge bases and holds tokens ('local' is the single-user owner)."""


@tenant.command("create")
@click.argument("name")
@JSON_OPTION
@click.pass_context
def tenant_create(ctx: click.Context, name: str, as_json: bool) -> None:
    """Create a tenant."""
    from kbmcp.service import tenants

    _admin(
        ctx,
        as_json,
        lambda ws, admin: tenants.create_tenant(ws, admin, name),
        lambda info: f"created tenant {printable(info.name)} ({info.tenant_id})",
        action="tenant create",
    )


@tenant.command("list")
@JSON_OPTION
@click.pass_context
def tenant_list(ctx: click.Context, as_json: bool) -> None:
    """List tenants with their knowledge-base and active-token counts."""
    from kbmcp.service import tenants

    _admin(
        ctx,
        as_json,
        tenants.list_tenants,
        lambda infos: [
            f"{info.tenant_id}  {printable(info.name)}  "
            f"{counted(info.knowledge_base_count, 'knowledge base')}, "
            f"{counted(info.active_token_count, 'active token')}"
            for info in infos
        ],
    )


@click.group("kb", cls=WholeSummaries)
def kb() -> None:
    """Knowledge bases: create them for a tenant, share them read-only with other tenants."""


@kb.command("create")
@click.argument("name")
@click.option("--tenant", "tenant_ref", default="local", show_default=True, help="Owner tenant.")
@click.option("--description", default="", help="What the knowledge base holds.")
@JSON_OPTION
@click.pass_context
def kb_create(
    ctx: click.Context, name: str, tenant_ref: str, description: str, as_json: bool
) -> None:
    """Create an (empty) knowledge base owned by a tenant; add files with `kbmcp add`."""
    from kbmcp.service import tenants

    _admin(
        ctx,
        as_json,
        lambda ws, admin: tenants.create_knowledge_base(
            ws, admin, name, tenant=tenant_ref, description=description
        ),
        lambda kb: (
            f"created knowledge base {printable(kb.name)} ({kb.knowledge_base_id}) "
            f"for {printable(kb.owner)}"
        ),
        action="kb create",
    )


@kb.command("list")
@click.option("--tenant", "tenant_ref", default=None, help="Only what this tenant can read.")
@JSON_OPTION
@click.pass_context
def kb_list(ctx: click.Context, tenant_ref: str | None, as_json: bool) -> None:
    """List knowledge bases with owner and the tenants they are shared with."""
    from kbmcp.service import tenants

    def line(kb: KnowledgeBaseRecord) -> str:
        shared = f"  shared with {printable(', '.join(kb.shared_with))}" if kb.shared_with else ""
        return f"{kb.knowledge_base_id}  {printable(kb.name)}  owner {printable(kb.owner)}{shared}"

    _admin(
        ctx,
        as_json,
        lambda ws, admin: tenants.list_knowledge_base_records(ws, admin, tenant=tenant_ref),
        lambda records: [line(kb) for kb in records],
    )


@kb.command("share")
@click.argument("knowledge_base")
@click.option("--tenant", "tenant_ref", required=True, help="The tenant that gets read access.")
@JSON_OPTION
@click.pass_context
def kb_share(ctx: click.Context, knowledge_base: str, tenant_ref: str, as_json: bool) -> None:
    """Share a knowledge base (name or id) read-only with another tenant."""
    _change_share(ctx, knowledge_base, tenant_ref, as_json, share=True)


@kb.command("unshare")
@click.argument("knowledge_base")
@click.option("--tenant", "tenant_ref", required=True, help="The tenant that loses access.")
@JSON_OPTION
@click.pass_context
def kb_unshare(ctx: click.Context, knowledge_base: str, tenant_ref: str, as_json: bool) -> None:
    """Stop sharing a knowledge base with a tenant (effective on its next call)."""
    _change_share(ctx, knowledge_base, tenant_ref, as_json, share=False)


def _change_share(
    ctx: click.Context, knowledge_base: str, tenant_ref: str, as_json: bool, *, share: bool
) -> None:
    from kbmcp.service import tenants

    change = tenants.share_knowledge_base if share else tenants.unshare_knowledge_base
    states = {
        (True, True): "shared",
        (True, False): "already shared",
        (False, True): "no longer shared",
        (False, False): "was not shared",
    }
    _admin(
        ctx,
        as_json,
        lambda ws, admin: change(ws, admin, knowledge_base, tenant=tenant_ref),
        lambda info: (
            f"{printable(info.knowledge_base)} ({info.knowledge_base_id}) "
            f"{states[(share, info.changed)]} with {printable(info.tenant)}"
        ),
        action="kb share" if share else "kb unshare",
        given=[knowledge_base],
        detail=lambda info: {"tenant": info.tenant, "changed": info.changed},
    )


@click.group(cls=WholeSummaries)
def token() -> None:
    """Bearer tokens for `kbmcp serve --http` (and KBMCP_TOKEN for stdio)."""


@token.command("create")
@click.option("--tenant", "tenant_ref", default="local", show_default=True, help="Token's tenant.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(TOKEN_SCOPES),
    help="A scope the token carries (repeatable; at least one).",
)
@click.option(
    "--kb",
    "knowledge_bases",
    multiple=True,
    metavar="KB",
    help="Limit the token to this knowledge base, name or id (repeatable; default: all the "
    "tenant can read).",
)
@click.option(
    "--expires",
    "expires_days",
    type=click.IntRange(1, MAX_EXPIRY_DAYS),
    default=None,
    metavar="DAYS",
    help="Expire after this many days (default: never).",
)
@click.option("--name", default="", help="A label shown by `kbmcp token list`.")
@JSON_OPTION
@click.pass_context
def token_create(
    ctx: click.Context,
    tenant_ref: str,
    scopes: tuple[str, ...],
    knowledge_bases: tuple[str, ...],
    expires_days: int | None,
    name: str,
    as_json: bool,
) -> None:
    """Create a token and print its secret (shown once: store it now)."""
    from kbmcp.service import tokens

    with open_workspace(ctx, create=True) as workspace:
        first = tokens.count_usable_tokens(workspace, workspace.local_principal()) == 0
        created = audited(
            workspace,
            workspace.local_principal(),
            "token create",
            lambda ws, admin: tokens.create_token(
                ws,
                admin,
                tenant=tenant_ref,
                scopes=list(scopes),
                knowledge_bases=list(knowledge_bases),
                expires_days=expires_days,
                name=name,
            ),
            # the token's id and allow-list, never its secret
            touched=lambda made: [made.token.token_id, *(made.token.knowledge_base_ids or [])],
            detail=lambda made: {"tenant": made.token.tenant, "scopes": made.token.scopes},
        )
    if first:
        # An HTTP server decides at its start whether it requires tokens (kbmcp/cli/serve.py
        # `http_verifier`): one started before this token serves without authentication until
        # it is restarted.
        click.echo(
            "note: this is the file's first usable token: HTTP servers started from now on "
            "require a token, but one already running on this file serves WITHOUT "
            "authentication until it is restarted: restart it to require tokens",
            err=True,
        )
    if as_json:
        echo_json(created)
        return
    click.echo(_token_line(created.token))
    click.echo("secret (shown once, not stored; send it as 'Authorization: Bearer <secret>'):")
    click.echo(created.secret)


@token.command("list")
@click.option("--tenant", "tenant_ref", default=None, help="Only this tenant's tokens.")
@JSON_OPTION
@click.pass_context
def token_list(ctx: click.Context, tenant_ref: str | None, as_json: bool) -> None:
    """List tokens (never their secrets)."""
    from kbmcp.service import tokens

    _admin(
        ctx,
        as_json,
        lambda ws, admin: tokens.list_tokens(ws, admin, tenant=tenant_ref),
        lambda infos: [_token_line(info) for info in infos],
    )


@token.command("revoke")
@click.argument("token_id")
@JSON_OPTION
@click.pass_context
def token_revoke(ctx: click.Context, token_id: str, as_json: bool) -> None:
    """Revoke a token: its next request is refused."""
    from kbmcp.service import tokens

    _admin(
        ctx,
        as_json,
        lambda ws, admin: tokens.revoke_token(ws, admin, token_id),
        _token_line,
        action="token revoke",
        given=[token_id],
    )


def _admin(
    ctx: click.Context,
    as_json: bool,
    call: Callable[[Workspace, Principal], T],
    render: Callable[[T], str | list[str]],
    *,
    action: str | None = None,
    given: Iterable[str] = (),
    detail: Callable[[T], dict[str, Any]] | None = None,
) -> None:
    """Run one administrative service call as the local operator; print JSON or lines. A call
    that writes names its `action`: it is recorded in the audit trail."""
    with open_workspace(ctx, create=True) as workspace:
        admin = workspace.local_principal()
        if action is None:
            result = call(workspace, admin)
        else:
            result = audited(workspace, admin, action, call, given=given, detail=detail)
    print_result(result, as_json, render)


def _token_line(info: TokenInfo) -> str:
    kbs = "all readable" if info.knowledge_base_ids is None else ",".join(info.knowledge_base_ids)
    expires = f"  expires {info.expires_at}" if info.expires_at else ""
    label = f"  name {printable(info.name)}" if info.name else ""  # last: it may hold spaces
    return (
        f"{info.token_id}  tenant {printable(info.tenant)}  {info.status}  "
        f"scopes {','.join(info.scopes)}  knowledge bases {kbs}{expires}{label}"
    )
