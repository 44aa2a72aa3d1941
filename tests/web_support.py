"""Shared by the web page's tests: a corpus with two tenants, hostile documents and memories,
tokens of every kind, and `kbmcp serve --http` processes whose pages are fetched over HTTP.

Tenant `acme` owns `acme-ops` (a runbook, an on-call page with two revisions, guides, and a
document whose path, title and text are markup with control characters) and `acme-notes`;
tenant `beta` owns `beta-docs`. acme and the local owner have memories. One build gives two
files: `tokens.db` with tokens (the server then needs one) and `open.db` without (the server
runs as the local owner, on loopback only); the local owner owns the knowledge base
`handbook` and memories of its own in both.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from selectolax.lexbor import LexborHTMLParser as HTMLParser
from selectolax.lexbor import LexborNode as Node

from kbmcp.service import listing, memories
from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.service.read import document_outline
from kbmcp.service.tokens import revoke_token
from tests.access_support import build_two_tenants, make_token, tenant_of
from tests.mcp_support import (
    ONCALL_V1,
    ONCALL_V2,
    RUNBOOK,
    SEARCH_GUIDE,
    T0,
    T1,
    hash_workspace,
    pinned_clock,
    write,
)
from tests.patience import ceiling
from tests.server_process import HttpProcess

# A path, a title and a text that are markup: each would run script if it reached the page
# unescaped (window.__xss is set by every one of them). The title also has a terminal escape,
# a BEL and a right-to-left override.
XSS_PATH = "<img src=x onerror=window.__xss=11>.md"
XSS_TITLE = '<img src=x onerror="window.__xss=12"> \x1b[31mAlarm\x07 \u202egnp.exe'
XSS_DOCUMENT = """\
---
title: "<img src=x onerror=\\"window.__xss=12\\"> \\e[31mAlarm\\a \\u202egnp.exe"
tags: [xss]
---
# <script>window.__xss=13</script> heading

Body text about the zebrafish <script>window.__xss=14</script> and
<img src=x onerror="window.__xss=15"> and <svg onload="window.__xss=16"></svg> and
<a href="javascript:window.__xss=17">a link</a> and <iframe src="javascript:window.__xss=18">.
"""
XSS_MEMORY = '<script>window.__xss=19</script><img src=x onerror="window.__xss=20"> zebrafish'

GUIDES = {
    f"guides/guide-{n}.md": f"# Guide {n}\n\nStep {n} of the kestrel procedure.\n"
    for n in range(1, 5)
}
ACME_MEMORIES = {
    "deploy": ("The deploy key rotates on the first Monday of each month.", {"topic": "deploy"}),
    "backup": ("Backups of the billing queue restore into a scratch instance.", {"topic": "ops"}),
    "xss": (XSS_MEMORY, {"topic": "xss"}),
    # One per test that forgets, so that no test depends on another's order.
    "forget-browser": ("The staging cluster is called heron.", {"topic": "forget"}),
    "forget-http": ("The old VPN gateway is called ptarmigan.", {"topic": "forget"}),
    "forget-readonly": ("The read-only test memory mentions the word bittern.", {}),
}
OWNER_MEMORIES = {
    "owner-fact": ("The local owner's printer is named osprey.", {"topic": "office"}),
    "owner-forget": ("The local owner's old router is named grebe.", {}),
    "owner-forget-browser": ("The local owner's old laptop is named plover.", {}),
    "owner-xss": (XSS_MEMORY, {}),
}

# Tokens of the tokens file: (tenant, scopes, knowledge-base allow-list).
TOKENS = {
    "acme": ("acme", ["knowledge:read", "memory:read", "memory:write"], []),
    "acme-read": ("acme", ["knowledge:read", "memory:read"], []),
    "acme-ops-only": ("acme", ["knowledge:read"], ["acme-ops"]),
    "acme-memory-only": ("acme", ["memory:read"], []),
    "beta": ("beta", ["knowledge:read", "memory:read", "memory:write"], []),
    "revoked": ("acme", ["knowledge:read"], []),  # revoked once made
}
LONG_SECTIONS = 40  # sections of ops/long.md: ~16,000 characters, more than one read window


@dataclass(frozen=True)
class WebCorpus:
    tokens_db: Path
    open_db: Path
    ids: dict[str, str]  # label -> public id (knowledge bases, documents, stores, memories)
    revisions: dict[str, list[str]]  # document label -> revision ids, oldest first
    secrets: dict[str, str]  # token label -> secret
    token_ids: dict[str, str]


def build_web_corpus(root: Path) -> WebCorpus:
    """The corpus (see the module's docstring); ids are read back through the services."""
    tokens_db = root / "tokens.db"
    build_two_tenants(root / "tenants", tokens_db)
    acme_ops = root / "tenants" / "acme-ops"
    handbook = write(root / "handbook", {"ops/runbook.md": RUNBOOK})
    ids: dict[str, str] = {}
    revisions: dict[str, list[str]] = {}
    with hash_workspace(tokens_db) as ws:
        admin = ws.local_principal()
        acme = tenant_of(ws, "acme")
        long_text = "# Long manual\n\n" + "".join(
            f"## Section {n}\n\n"
            + f"Routine paragraph {n} about nothing in particular. " * 6
            + ("The albatross valve is in the last section.\n\n" if n == LONG_SECTIONS else "\n\n")
            for n in range(1, LONG_SECTIONS + 1)
        )
        write(
            acme_ops,
            {"ops/oncall.md": ONCALL_V1, "ops/runbook.md": RUNBOOK, "ops/long.md": long_text}
            | GUIDES,
        )
        (acme_ops / XSS_PATH).write_text(XSS_DOCUMENT, encoding="utf-8")
        with pinned_clock(T0):
            add_paths(ws, acme, [acme_ops], IngestOptions(knowledge_base="acme-ops"))
            add_paths(ws, admin, [handbook], IngestOptions(knowledge_base="handbook"))
        write(acme_ops, {"ops/oncall.md": ONCALL_V2, "guides/search.md": SEARCH_GUIDE})
        with pinned_clock(T1):
            add_paths(ws, acme, [acme_ops], IngestOptions(knowledge_base="acme-ops"))
        for principal, facts in ((acme, ACME_MEMORIES), (admin, OWNER_MEMORIES)):
            for label, (content, tags) in facts.items():
                with pinned_clock(T1):
                    made = memories.remember(ws, principal, content, tags=tags)
                ids[label] = made.memory_id
                ids[f"{label}:store"] = made.memory_store_id
        beta = tenant_of(ws, "beta")
        with pinned_clock(T1):
            beta_memory = memories.remember(ws, beta, "Beta's own secret: the lynx protocol.")
        ids["beta-memory"] = beta_memory.memory_id
        ids["beta:store"] = beta_memory.memory_store_id
        for principal in (acme, beta, admin):
            for kb in listing.list_knowledge_bases(ws, principal):
                ids[kb.knowledge_base_id] = kb.name
                ids[kb.name] = kb.knowledge_base_id
                page = listing.list_documents(
                    ws, principal, knowledge_base_ids=[kb.knowledge_base_id], limit=200
                )
                for doc in page.documents:
                    ids[f"{kb.name}:{doc.path}"] = doc.document_id
        oncall = ids["acme-ops:ops/oncall.md"]
        outline = document_outline(ws, acme, oncall)
        revisions["oncall"] = [r.revision_id for r in reversed(outline.revisions)]
    # The file without tokens, copied before any token exists (WAL folded in by close()).
    open_db = root / "open.db"
    shutil.copyfile(tokens_db, open_db)
    secrets, token_ids = {}, {}
    for label, (tenant, scopes, kbs) in TOKENS.items():
        token_ids[label], secrets[label] = make_token(
            tokens_db, tenant, scopes, knowledge_bases=kbs
        )
    with hash_workspace(tokens_db) as ws:
        revoke_token(ws, ws.local_principal(), token_ids["revoked"])
    return WebCorpus(tokens_db, open_db, ids, revisions, secrets, token_ids)


# ------------------------------------------------------------------ the server and its pages


class WebServer:
    """`kbmcp serve --http` on a database, its pages fetched with httpx (no script runs)."""

    def __init__(self, db: Path | str, *serve_args: str) -> None:
        self.process = HttpProcess(db, *serve_args)  # type: ignore[arg-type]
        self.mcp_url = self.process.url
        self.base = self.mcp_url.removesuffix("/mcp")
        self.http = httpx2.Client(base_url=self.base, follow_redirects=False, timeout=ceiling(60))

    def get(self, path: str, token: str | None = None, **headers: str) -> httpx2.Response:
        return self.http.get(path, headers=_headers(token, headers))

    def post(self, path: str, token: str | None = None, **headers: str) -> httpx2.Response:
        return self.http.post(path, headers=_headers(token, headers))

    def stop(self) -> None:
        self.http.close()
        self.process.stop()


def _headers(token: str | None, extra: dict[str, str]) -> dict[str, str]:
    headers = {name.replace("_", "-"): value for name, value in extra.items()}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def page(response: httpx2.Response) -> HTMLParser:
    return HTMLParser(response.text)


def main_text(response: httpx2.Response) -> str:
    """The text of the page's <main>, spaces collapsed."""
    main = page(response).css_first("main")
    assert main is not None, response.text[:500]
    return re.sub(r"\s+", " ", main.text()).strip()


def auth_state(response: httpx2.Response) -> str | None:
    main = page(response).css_first("main")
    return None if main is None else main.attributes.get("data-kbmcp-auth")


def search_rows(response: httpx2.Response) -> list[dict[str, Any]]:
    """The search page's results as the page states them: chunk id, score (as printed in its
    data attribute: Python's repr of the float) and the two channels' ranks."""
    return [row_data(node) for node in page(response).css("#results li[data-chunk-id]")]


def row_data(node: Node) -> dict[str, Any]:
    attributes = node.attributes
    return {
        "chunk_id": attributes["data-chunk-id"],
        "score": float(attributes["data-score"] or "nan"),
        "lexical_rank": _rank(attributes.get("data-lexical-rank")),
        "semantic_rank": _rank(attributes.get("data-semantic-rank")),
    }


def mcp_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same four facts of search_knowledge's results."""
    return [
        {key: result[key] for key in ("chunk_id", "score", "lexical_rank", "semantic_rank")}
        for result in results
    ]


def _rank(value: str | None) -> int | None:
    return int(value) if value else None


def found_ids(body: dict[str, Any]) -> set[str]:
    """The documents and memories a search_knowledge answer found (its results' document_id)."""
    return {result["document_id"] for result in body["results"]}


def cited_read(result: dict[str, Any]) -> dict[str, Any]:
    """search_knowledge arguments of a targeted read of exactly the passage `result` cites."""
    citation = result["citation"]
    return {
        "document_id": result["document_id"],
        "revision_id": citation["revision_id"],
        "offset": citation["char_start"],
        "limit_chars": citation["char_end"] - citation["char_start"],
    }


def links(response: httpx2.Response, selector: str = "a") -> list[str]:
    return [node.attributes.get("href") or "" for node in page(response).css(selector)]


def unknown_id(kind: str) -> str:
    """A well-formed id that names nothing."""
    return f"{kind}_{'0' * 16}"


def same_but_ids(first: str, second: str, ids: Iterator[str] | list[str]) -> bool:
    """Two pages' texts are equal once the given ids are blanked out."""
    for public_id in ids:
        first, second = first.replace(public_id, "ID"), second.replace(public_id, "ID")
    return first == second
