"""`kbmcp tenant`, `kbmcp kb` and `kbmcp token`: who may read what (the local operator's tools).

Each command prints one line per item, or JSON with --json. `token create` prints the secret
once; it is not stored and cannot be shown again.
"""

from __future__ import annotations

import click

from kbmcp.access import TOKEN_SCOPES
from kbmcp.cli.common import echo_json, open_workspace
from kbmcp.service import tenants, tokens
from kbmcp.service.tokens import MAX_EXPIRY_DAYS, TokenInfo

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.group()
def tenant() -> None:
    """Tenants: who owns knowledge bases and holds tokens ('local' is the single-user owner)."""


@tenant.command("create")
@click.argument("name")
@JSON_OPTION
@click.pass_context
def tenant_create(ctx: click.Context, name: str, as_json: bool) -> None:
    """Create a tenant."""
    with open_workspace(ctx, create=True) as workspace:
        info = tenants.create_tenant(workspace, workspace.local_principal(), name)
    if as_json:
        echo_json(info)
    else:
        click.echo(f"created tenant {info.name} ({info.tenant_id})")


@tenant.command("list")
@JSON_OPTION
@click.pass_context
def tenant_list(ctx: click.Context, as_json: bool) -> None:
    """List tenants with their knowledge-base and active-token counts."""
    with open_workspace(ctx, create=True) as workspace:
        infos = tenants.list_tenants(workspace, workspace.local_principal())
    if as_json:
        echo_json(infos)
        return
    for info in infos:
        click.echo(
            f"{info.tenant_id}  {info.name}  {info.knowledge_base_count} knowledge bases, "
            f"{info.active_token_count} active tokens"
        )


@click.group("kb")
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
    with open_workspace(ctx, create=True) as workspace:
        record = tenants.create_knowledge_base(
            workspace,
            workspace.local_principal(),
            name,
            tenant=tenant_ref,
            description=description,
        )
    if as_json:
        echo_json(record)
    else:
        click.echo(
            f"created knowledge base {record.name} ({record.knowledge_base_id}) for {record.owner}"
        )


@kb.command("list")
@click.option("--tenant", "tenant_ref", default=None, help="Only what this tenant can read.")
@JSON_OPTION
@click.pass_context
def kb_list(ctx: click.Context, tenant_ref: str | None, as_json: bool) -> None:
    """List knowledge bases with owner and the tenants they are shared with."""
    with open_workspace(ctx, create=True) as workspace:
        records = tenants.list_knowledge_base_records(
            workspace, workspace.local_principal(), tenant=tenant_ref
        )
    if as_json:
        echo_json(records)
        return
    for record in records:
        shared = f"  shared with {', '.join(record.shared_with)}" if record.shared_with else ""
        click.echo(f"{record.knowledge_base_id}  {record.name}  owner {record.owner}{shared}")


@kb.command("share")
@click.argument("knowledge_base")
@click.option("--tenant", "tenant_ref", required=True, help="The tenant that gets read access.")
@JSON_OPTION
@click.pass_context
def kb_share(ctx: click.Context, knowledge_base: str, tenant_ref: str, as_json: bool) -> None:
    """Share a knowledge base (name or id) read-only with another tenant."""
    with open_workspace(ctx, create=True) as workspace:
        info = tenants.share_knowledge_base(
            workspace, workspace.local_principal(), knowledge_base, tenant=tenant_ref
        )
    if as_json:
        echo_json(info)
    else:
        state = "shared" if info.changed else "already shared"
        click.echo(f"{info.knowledge_base} ({info.knowledge_base_id}) {state} with {info.tenant}")


@kb.command("unshare")
@click.argument("knowledge_base")
@click.option("--tenant", "tenant_ref", required=True, help="The tenant that loses access.")
@JSON_OPTION
@click.pass_context
def kb_unshare(ctx: click.Context, knowledge_base: str, tenant_ref: str, as_json: bool) -> None:
    """Stop sharing a knowledge base with a tenant (effective on its next call)."""
    with open_workspace(ctx, create=True) as workspace:
        info = tenants.unshare_knowledge_base(
            workspace, workspace.local_principal(), knowledge_base, tenant=tenant_ref
        )
    if as_json:
        echo_json(info)
    else:
        state = "no longer shared" if info.changed else "was not shared"
        click.echo(f"{info.knowledge_base} ({info.knowledge_base_id}) {state} with {info.tenant}")


@click.group()
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
    with open_workspace(ctx, create=True) as workspace:
        created = tokens.create_token(
            workspace,
            workspace.local_principal(),
            tenant=tenant_ref,
            scopes=list(scopes),
            knowledge_bases=list(knowledge_bases),
            expires_days=expires_days,
            name=name,
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
    with open_workspace(ctx, create=True) as workspace:
        infos = tokens.list_tokens(workspace, workspace.local_principal(), tenant=tenant_ref)
    if as_json:
        echo_json(infos)
        return
    for info in infos:
        click.echo(_token_line(info))


@token.command("revoke")
@click.argument("token_id")
@JSON_OPTION
@click.pass_context
def token_revoke(ctx: click.Context, token_id: str, as_json: bool) -> None:
    """Revoke a token: its next request is refused."""
    with open_workspace(ctx, create=True) as workspace:
        info = tokens.revoke_token(workspace, workspace.local_principal(), token_id)
    if as_json:
        echo_json(info)
    else:
        click.echo(_token_line(info))


def _token_line(info: TokenInfo) -> str:
    kbs = "all readable" if info.knowledge_base_ids is None else ",".join(info.knowledge_base_ids)
    label = f" {info.name!r}" if info.name else ""
    expires = f" expires {info.expires_at}" if info.expires_at else ""
    return (
        f"{info.token_id}{label}  tenant {info.tenant}  {info.status}  "
        f"scopes {','.join(info.scopes)}  knowledge bases {kbs}{expires}"
    )
