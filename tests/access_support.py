"""Shared by the access-control tests: a two-tenant file, tokens, and authenticated HTTP clients.

Tenant `acme` owns the knowledge bases `acme-ops` (a runbook) and `acme-notes`; tenant `beta`
owns `beta-docs`. Every document carries a word no other tenant's documents contain, so a search
for it shows exactly whose content a caller can reach.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from kbmcp.access import Principal
from kbmcp.clock import format_timestamp
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.service.tokens import create_token
from kbmcp.store.sqlite.connection import open_connection
from kbmcp.workspace import Workspace
from tests.mcp_support import T0, hash_workspace, pinned_clock, write

ACME_OPS = """\
# Acme failover runbook

Zanzibar is the codename of the acme failover procedure. Promote the standby, then repoint
the load balancer.

## Rollback

Demote the promoted standby if the zanzibar checks fail.
"""
ACME_NOTES = "Acme notes: the quokka cluster hosts the billing queue.\n"
BETA_DOCS = """\
# Beta onboarding

Every beta engineer receives a narwhal badge on the first day.
"""

# The word only each knowledge base contains.
MARKERS = {"acme-ops": "zanzibar", "acme-notes": "quokka", "beta-docs": "narwhal"}


def build_two_tenants(root: Path, db_path: Path) -> None:
    """Tenants acme and beta with their knowledge bases, ingested at T0."""
    files = {
        "acme-ops": write(root / "acme-ops", {"failover.md": ACME_OPS}),
        "acme-notes": write(root / "acme-notes", {"notes.txt": ACME_NOTES}),
        "beta-docs": write(root / "beta-docs", {"onboarding.md": BETA_DOCS}),
    }
    owners = {"acme-ops": "acme", "acme-notes": "acme", "beta-docs": "beta"}
    with hash_workspace(db_path) as ws, pinned_clock(T0):
        admin = ws.local_principal()
        for tenant in ("acme", "beta"):
            create_tenant(ws, admin, tenant)
        for kb, folder in files.items():
            principal = act_as_tenant(ws, admin, owners[kb])
            add_paths(ws, principal, [folder], IngestOptions(knowledge_base=kb))


def make_token(
    db_path: Path,
    tenant: str,
    scopes: Sequence[str],
    *,
    knowledge_bases: Sequence[str] = (),
    expires_days: int | None = None,
) -> tuple[str, str]:
    """(token id, secret) for a new token."""
    with hash_workspace(db_path) as ws:
        created = create_token(
            ws,
            ws.local_principal(),
            tenant=tenant,
            scopes=scopes,
            knowledge_bases=knowledge_bases,
            expires_days=expires_days,
        )
    return created.token.token_id, created.secret


def expire_token(db_path: Path, token_id: str) -> None:
    """Make a token expired by the machine's clock (an hour ago): kbmcp never reads a pinned
    clock for tokens, so an expired token is made by its row."""
    past = format_timestamp(datetime.now(UTC) - timedelta(hours=1))
    conn = open_connection(db_path)
    conn.execute("UPDATE token SET expires_at = ? WHERE public_id = ?", (past, token_id))
    conn.close()


def names_of(kb_ids_by_name: dict[str, str], kb_ids: set[str]) -> set[str]:
    """Knowledge-base names for a set of kb_ ids."""
    by_id = {kb_id: name for name, kb_id in kb_ids_by_name.items()}
    return {by_id[kb_id] for kb_id in kb_ids}


def admin_workspace(db_path: Path) -> Workspace:
    return hash_workspace(db_path)


def tenant_of(ws: Workspace, name: str) -> Principal:
    return act_as_tenant(ws, ws.local_principal(), name)


def bearer_client(secret: str | None) -> httpx2.AsyncClient:
    headers = {} if secret is None else {"Authorization": f"Bearer {secret}"}
    return create_mcp_http_client(headers=headers)


@contextlib.asynccontextmanager
async def connect_with_token(url: str, secret: str) -> AsyncIterator[Client]:
    """An SDK client over streamable HTTP sending `Authorization: Bearer <secret>`."""
    async with (
        bearer_client(secret) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client
