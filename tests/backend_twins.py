"""One corpus in an SQLite file and, copied by `kbmcp copy` (ids unchanged), in PostgreSQL: a
read, listing, scan or memory list must give the same answer on both (ids, order, fields).

The corpus is the rich one of the ranking tests (tenants, a share, memories, a forgotten memory,
a revised document: tests/postgres_search.py) plus what the reads and listings tell apart:
an archived document, knowledge base names and paths whose byte order is not a locale's
(upper/lower case, accents, '%' and '_'), documents written at the same instant (keyset ties),
and metadata of every JSON type for the typed metadata filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Principal
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import KbError
from kbmcp.service.ingest import DocumentInput, add_documents, archive_row
from kbmcp.store import copy
from kbmcp.workspace import Workspace
from tests.mcp_support import T0, T1, T2, hash_workspace, pinned_clock
from tests.postgres_search import build_rich_corpus

T3 = "2026-01-04T00:00:00Z"

# Names in byte order: "Zeta" < "alpha" < "beta" < "Émile" (a locale would sort them
# alpha, beta, Émile, Zeta).
ORDERED_KBS = {
    "alpha": [
        DocumentInput("b/one.md", "# One\n\nThe first note of alpha, about quokkas.\n"),
        DocumentInput("B/two.md", "# Two\n\nThe second note of alpha, about narwhals.\n"),
        DocumentInput(
            "a_b/100%.md", "# Percent\n\nA path with a percent sign and an underscore.\n"
        ),
        DocumentInput("ab/x.md", "# Near\n\nA path that a LIKE 'a_b' pattern would match.\n"),
        DocumentInput("é/accent.md", "# Accent\n\nA path that starts with an accented letter.\n"),
    ],
    "Zeta": [
        DocumentInput(
            f"typed/{name}.md",
            f"# {name}\n\nA document whose metadata value is {name}.\n",
            metadata={"value": value, "kind": "typed"},
            tags=[("typed", "yes"), ("Value", name)],
        )
        for name, value in (
            ("int2", 2),
            ("real2", 2.0),
            ("real2_5", 2.5),
            ("big", 1e20),
            ("tiny", 1.5e-07),
            ("sum", 0.1 + 0.2),
            ("true", True),
            ("false", False),
            ("null", None),
            ("text2", "2"),
            ("text_true", "true"),
            ("text", "two"),
            ("one", 1),
        )
    ],
    "Émile": [
        DocumentInput(
            "whole.txt",
            "\n\n   A short text that one chunk covers whole, blanks around it.   \n\n",
        ),
    ],
}
LATER = DocumentInput("b/later.md", "# Later\n\nWritten a day after the others, then archived.\n")


def build_twin_corpus(root: Path, db_path: Path) -> None:
    build_rich_corpus(root, db_path)
    with hash_workspace(db_path) as ws:
        principal = ws.local_principal()
        with pinned_clock(T1):
            for kb, documents in ORDERED_KBS.items():
                add_documents(ws, principal, kb, documents)
        with pinned_clock(T2):
            add_documents(ws, principal, "alpha", [LATER])
        with pinned_clock(T3):
            row_id = ws.conn.execute(
                "SELECT id FROM document WHERE path = ?", (LATER.path,)
            ).fetchone()[0]
            archive_row(ws, row_id)
        with pinned_clock(T0):  # an edit at an earlier instant than the first write's
            add_documents(ws, principal, "alpha", [DocumentInput("b/one.md", "# One\n\nEdited.\n")])


def twin_workspaces(root: Path, postgres_url: str) -> Iterator[tuple[Workspace, Workspace]]:
    """The corpus in `root`/kb.db and in the PostgreSQL database `postgres_url`, a workspace
    on each (SQLite first)."""
    path = root / "kb.db"
    build_twin_corpus(root / "files", path)
    copy.copy_store(str(path), postgres_url, force=True)
    workspaces = [
        Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder(), create=False)
        for db in (path, postgres_url)
    ]
    try:
        yield workspaces[0], workspaces[1]
    finally:
        for ws in workspaces:
            ws.close()


def principals(ws: Workspace) -> dict[str, Principal]:
    """Callers that see different parts of the corpus (row ids are equal on both backends): the
    local owner, tenant acme (its own stores and beta's shared one), acme's tokens with one read
    scope each, and a token limited to one knowledge base."""
    tenants = {
        name: Principal(row_id, public_id)
        for row_id, public_id, name in ws.conn.execute("SELECT id, public_id, name FROM tenant")
    }
    acme = tenants["acme"]
    shared = ws.conn.execute(
        "SELECT public_id FROM knowledge_base WHERE name = 'beta-docs'"
    ).fetchone()[0]
    return {
        "local": tenants["local"],
        "acme": acme,
        "acme-documents": Principal(
            acme.tenant_id, acme.tenant_public_id, frozenset({KNOWLEDGE_READ})
        ),
        "acme-memories": Principal(acme.tenant_id, acme.tenant_public_id, frozenset({MEMORY_READ})),
        "acme-beta-only": Principal(
            acme.tenant_id,
            acme.tenant_public_id,
            frozenset({KNOWLEDGE_READ, MEMORY_READ}),
            knowledge_base_allowlist=frozenset({shared}),
        ),
    }


def outcome(call: Callable[[], Any]) -> Any:
    """What a service call answers: its result, or its error as the caller sees it."""
    try:
        return call()
    except KbError as error:
        return error.to_dict()
