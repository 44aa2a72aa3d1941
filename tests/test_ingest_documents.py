"""`add_documents`: documents given as text, with or without precomputed vectors."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.base import DelegatingEmbedder
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.errors import InvalidRequest
from kbmcp.ingest.chunker import chunk_document
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import DocumentInput, add_documents
from kbmcp.service.search import search
from kbmcp.store.vectors import from_blob
from kbmcp.workspace import Workspace

GUIDE = (
    "---\ntags: [birds]\nowner: ann\n---\n# Herons\n\nHerons wait.\n\n## Egrets\n\nEgrets wade.\n"
)


class NoEmbedding(DelegatingEmbedder):
    """Counts embedding calls."""

    def __init__(self) -> None:
        super().__init__(HashingEmbedder())
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return self.inner.embed(texts)


@pytest.fixture
def counted(db_path: Path) -> Iterator[tuple[Workspace, NoEmbedding]]:
    embedder = NoEmbedding()
    workspace = Workspace(Settings(db=db_path, embedder="hash"), embedder=embedder)
    yield workspace, embedder
    workspace.close()


def test_given_vectors_are_stored_and_nothing_is_embedded(
    counted: tuple[Workspace, NoEmbedding],
) -> None:
    workspace, embedder = counted
    spans = chunk_document(GUIDE, "markdown")
    vectors = np.eye(len(spans), 384, dtype=np.float32)  # one unit vector per chunk
    report = add_documents(
        workspace,
        workspace.local_principal(),
        "imported",
        [DocumentInput("birds/guide.md", GUIDE, vectors=vectors, metadata={"source": "import"})],
    )
    assert (report.added, report.chunks_indexed, report.chunks_embedded) == (1, 2, 0)
    assert embedder.calls == 0
    stored = workspace.conn.execute(
        "SELECT v.embedding FROM chunk c JOIN chunk_vector v ON v.chunk_id = c.id "
        "ORDER BY c.ordinal"
    ).fetchall()
    assert np.array_equal(np.stack([from_blob(blob) for (blob,) in stored]), vectors)
    row = workspace.conn.execute("SELECT title, kind, metadata, source FROM document").fetchone()
    assert row == ("Herons", "markdown", '{"owner":"ann","source":"import"}', None)
    tags = workspace.conn.execute("SELECT key, value FROM document_tag").fetchall()
    assert tags == [("tag", "birds")]
    hits = search(workspace, workspace.local_principal(), SearchRequest("egrets", mode="lexical"))
    assert [(r.path, r.heading_path) for r in hits.results] == [
        ("birds/guide.md", ["Herons", "Egrets"])
    ]
    # the same again: unchanged; new content: a new revision
    again = add_documents(
        workspace, workspace.local_principal(), "imported", [DocumentInput("birds/guide.md", GUIDE)]
    )
    assert again.unchanged == 0 and again.updated == 1  # metadata differs: updated in place
    edited = GUIDE.replace("Egrets wade.", "Egrets wade slowly.")
    third = add_documents(
        workspace,
        workspace.local_principal(),
        "imported",
        [DocumentInput("birds/guide.md", edited, title="Wading birds")],
    )
    assert third.updated == 1 and third.chunks_embedded == 2  # the new title changes every input
    assert workspace.conn.execute("SELECT count(*) FROM revision").fetchone() == (2,)
    title = workspace.conn.execute("SELECT title FROM document").fetchone()[0]
    assert title == "Wading birds"


def test_without_vectors_the_model_embeds(counted: tuple[Workspace, NoEmbedding]) -> None:
    workspace, embedder = counted
    report = add_documents(
        workspace,
        workspace.local_principal(),
        "kb",
        [DocumentInput("a.txt", "alpha"), DocumentInput("b", "beta", kind="text")],
    )
    assert (report.added, report.chunks_embedded) == (2, 2) and embedder.calls == 1


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (DocumentInput("", "x"), "a document path must not be empty"),
        (DocumentInput("a.md", "x", kind="docx"), "a.md: unknown kind 'docx'"),
        (DocumentInput("a.md", "# A\n\ntext", vectors=[[0.0] * 3]), "vectors must be 1 x 384"),
        (DocumentInput("a.md", "# A", vectors=[[float("nan")] * 384]), "vectors must be finite"),
        (DocumentInput("a.md", "# A", metadata={"when": object()}), "metadata is not JSON"),
    ],
)
def test_bad_documents_are_refused_before_anything_is_written(
    counted: tuple[Workspace, NoEmbedding], document: DocumentInput, message: str
) -> None:
    workspace, _ = counted
    good = DocumentInput("good.md", "# Good")
    with pytest.raises(InvalidRequest, match=message):
        add_documents(workspace, workspace.local_principal(), "kb", [good, document])
    assert workspace.conn.execute("SELECT count(*) FROM document").fetchone() == (0,)
    with pytest.raises(InvalidRequest, match=r"the same path more than once: good\.md"):
        add_documents(workspace, workspace.local_principal(), "kb", [good, good])


def test_the_example_in_docs_ingest_md_runs(capsys: pytest.CaptureFixture[str]) -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "ingest.md").read_text()
    (example,) = re.findall(r"^```python\n(.*?)^```", docs, re.M | re.S)
    exec(example, {"my_model": HashingEmbedder()})  # the database is $KBMCP_DB (a temp file)
    assert capsys.readouterr().out.startswith("imported: added 1, updated 0")
