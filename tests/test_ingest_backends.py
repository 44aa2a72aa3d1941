"""Ingest gives the same knowledge base on both backends (issue 18): the same files added, edited,
moved, pruned, written in parts, given as text and archived leave the same rows (ids,
revisions, chunks, tags, recorded files) and the same keyword and vector indexes in an SQLite
file and in a PostgreSQL database, with the same reports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service.ingest import (
    DocumentInput,
    IngestOptions,
    IngestReport,
    add_documents,
    add_paths,
    archive_document,
)
from kbmcp.workspace import Workspace
from tests.backend_state import catalog_state, index_state, indexed_chunk_ids
from tests.file_tree import write_tree

BOUND = 40  # chunks per write transaction: the huge document is written in parts

TREE = {
    "index.md": "# Home\n\nThe top page about herons.\n\n## Shore\n\nHerons wade at dawn.\n",
    "sub/tagged.md": (
        "---\ntitle: Tagged notes\ntags: {team: birds, kind: field}\nowner: ana\npriority: 2\n"
        "---\nEgrets and bitterns share the marsh.\n"
    ),
    "sub/page.html": "<html><head><title>Page</title></head><body><h1>Storks</h1>"
    "<p>Storks nest on roofs.</p></body></html>",
    "sub/plain.txt": "A plain text note about ibises.\n",
    "sub/deep/deep.rst": "Deep\n====\n\nBitterns boom in the deep reeds.\n",
}


def big_document(sections: int) -> str:
    body = ["# Field notes\n"]
    for number in range(sections):
        line = " ".join(f"heron{number % 7} wades through reed bed {number}" for _ in range(30))
        body.append(f"## Section {number}\n\n{line}\n")
    return "\n".join(body)


@pytest.fixture
def both(tmp_path: Path, fresh_postgres_url: str) -> Iterator[list[Workspace]]:
    """A workspace on an SQLite file and one on a PostgreSQL database, same settings."""
    workspaces = [
        Workspace(
            Settings(db=db, embedder="hash", write_batch_chunks=BOUND),
            embedder=HashingEmbedder(),
            create=True,
        )
        for db in (tmp_path / "kb.db", fresh_postgres_url)
    ]
    try:
        yield workspaces
    finally:
        for ws in workspaces:
            ws.close()


def report_of(report: IngestReport) -> dict[str, Any]:
    return {k: v for k, v in report.to_dict().items() if k != "seconds"}


def same_on_both(workspaces: list[Workspace], step: Callable[[Workspace], Any]) -> Any:
    """Run `step` on each backend; the results and the stored states must be equal."""
    results = [step(ws) for ws in workspaces]
    assert results[0] == results[1]
    sqlite, postgres = workspaces
    assert catalog_state(postgres) == catalog_state(sqlite)
    assert index_state(postgres) == index_state(sqlite)
    state = index_state(sqlite)
    assert state["keyword_chunks"] == list(state["indexed_vectors"]) == indexed_chunk_ids(sqlite)
    return results[0]


def add(paths: list[Path], **options: Any) -> Callable[[Workspace], dict[str, Any]]:
    def step(ws: Workspace) -> dict[str, Any]:
        report = add_paths(ws, ws.local_principal(), paths, IngestOptions(**options))
        return report_of(report)

    return step


def test_the_same_adds_give_the_same_knowledge_base(both: list[Workspace], tmp_path: Path) -> None:
    root = write_tree(tmp_path / "docs", TREE)
    # a subfolder first, then its parent: the subfolder's documents move under the parent
    first = same_on_both(both, add([root / "sub"]))
    assert first["added"] == 4, first
    moved = same_on_both(both, add([root]))
    assert (moved["added"], moved["moved"], moved["unchanged"]) == (1, 4, 4)
    # an edit (new revision), a new title for the same text (same revision), a deleted file
    (root / "index.md").write_text("# Home\n\nThe top page about herons and egrets.\n")
    tagged = (root / "sub/tagged.md").read_text().replace("Tagged notes", "Marsh notes")
    (root / "sub/tagged.md").write_text(tagged)
    (root / "sub/plain.txt").unlink()
    edited = same_on_both(both, add([root], prune=True, tags=[("source", "test")]))
    assert (edited["updated"], edited["archived"]) == (4, 1)
    # unchanged now, read again by signature
    again = same_on_both(both, add([root], prune=True, tags=[("source", "test")]))
    assert again["unchanged"] == 4 and again["chunks_embedded"] == 0
    # a document too large for one write transaction: written in parts, then switched
    (root / "huge.md").write_text(big_document(60))
    huge = same_on_both(both, add([root], tags=[("source", "test")]))
    assert huge["added"] == 1 and huge["chunks_indexed"] > 2 * BOUND
    (root / "huge.md").write_text(big_document(60).replace("Section 7\n", "Section 7 ibis\n"))
    assert same_on_both(both, add([root], tags=[("source", "test")]))["updated"] == 1
    for ws in both:
        assert catalog_state(ws)["staged_revision"] == []
    # the deleted file comes back: its archived document is restored
    (root / "sub/plain.txt").write_text("A plain text note about ibises.\n")
    assert same_on_both(both, add([root], tags=[("source", "test")]))["updated"] == 1


def test_documents_given_as_text_and_archiving_are_the_same(both: list[Workspace]) -> None:
    vectors = np.stack([HashingEmbedder().embed(["given vector"])[0]] * 1)

    def given(ws: Workspace) -> dict[str, Any]:
        documents = [
            DocumentInput("notes/a.md", "# A\n\nAlpha text about cranes.\n", tags=[("k", "v")],
                          metadata={"n": 1, "r": 0.5, "b": True, "s": "x"}),
            DocumentInput("notes/b.txt", "Bravo text.", vectors=vectors, source="/src/b.txt"),
        ]  # fmt: skip
        return report_of(add_documents(ws, ws.local_principal(), "api", documents))

    assert same_on_both(both, given)["added"] == 2

    def archive(ws: Workspace) -> str:
        public_id = ws.conn.execute("SELECT public_id FROM document WHERE path = 'notes/a.md'")
        document_id = public_id.fetchone()[0]
        archive_document(ws, ws.local_principal(), document_id)
        return document_id

    same_on_both(both, archive)
    # given again: restored on its revision, indexed again from its stored vectors
    restored = same_on_both(both, given)
    assert (restored["updated"], restored["unchanged"]) == (1, 1)
    assert same_on_both(both, given)["unchanged"] == 2
