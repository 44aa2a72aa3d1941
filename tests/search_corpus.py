"""Small corpora for the search tests, written as files and ingested through the real pipeline."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kbmcp.service.ingest import IngestOptions, add_paths
from kbmcp.workspace import Workspace

# Decoys say a lot about the query's subject; the target says little. Unscoped, the target's
# chunks rank far below hundreds of decoy chunks in both channels.
DECOY_COUNT = 300
QUERY = "vector index scope filtering before the limit"
TARGET_PATH = "garden/tomatoes.md"
TARGET_TAG = ("team", "garden")
TARGET_META = ("owner", "gardener")


def decoy_text(i: int) -> str:
    return textwrap.dedent(
        f"""\
        ---
        title: Vector index note {i}
        tags: {{team: search}}
        owner: engine
        ---
        # Vector index scope filtering {i}

        The vector index applies scope filtering before the limit. Filtering the vector index
        by scope before the limit keeps vector search exact; index scope filtering note {i}.
        """
    )


TARGET_TEXT = textwrap.dedent(
    """\
    ---
    title: Tomatoes
    tags: {team: garden}
    owner: gardener
    ---
    # Tomatoes

    Tomatoes want full sun. Mulch the beds and water deeply; a vector of pests is the limit of
    our patience, so check the leaves.

    ## Harvest

    Pick when red. Store at room temperature, never in a fridge: cold kills their flavour and
    turns flesh mealy within days of picking them.
    """
)


def write_adversarial_corpus(root: Path) -> Path:
    docs = root / "corpus"
    (docs / "notes").mkdir(parents=True)
    (docs / "garden").mkdir()
    for i in range(DECOY_COUNT):
        (docs / "notes" / f"note{i:03d}.md").write_text(decoy_text(i), encoding="utf-8")
    (docs / TARGET_PATH).write_text(TARGET_TEXT, encoding="utf-8")
    return docs


SMALL_CORPUS = {
    "handbook/keys.md": """\
        ---
        title: Rotating API keys
        tags: {team: security}
        audience: ops
        version: 2
        ---
        # Rotating API keys

        To rotate keys, create a new token, deploy it everywhere, then revoke the old token.
        Tokens are stored hashed, so a lost token cannot be recovered: issue a new one.

        ## Revoking

        Revocation takes effect immediately for every running server and every client.
        """,
    "handbook/backups.md": """\
        ---
        title: Backups
        tags: {team: ops}
        audience: ops
        version: 1
        ---
        # Backups

        The knowledge base is one SQLite file. Back it up with the online backup API or by
        copying the file while no writer is active. Keys are not part of the backup.
        """,
    "guide/search.md": """\
        ---
        title: Searching
        tags: {team: search}
        audience: agents
        draft: true
        ---
        # Searching

        Search runs inside the scope you name: knowledge bases, documents, path prefixes, tags
        and metadata apply before ranking, so the best passages of a small scope are found even
        when better matches exist elsewhere. Hybrid search fuses keyword and vector scores.

        ## Modes

        Lexical search uses bm25 over the text, title and headings. Semantic search compares
        embeddings by cosine similarity. RRF sums reciprocal ranks.
        """,
    "guide/cpp.txt": """\
        Building the C++ bindings for sqlite-vec: what's needed is a compiler and cmake.
        Emoji in text 🚀 are kept as they are.
        """,
}


def write_small_corpus(root: Path) -> Path:
    docs = root / "small"
    for relative, text in SMALL_CORPUS.items():
        path = docs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return docs


def ingest(workspace: Workspace, folder: Path, kb: str = "default") -> None:
    report = add_paths(
        workspace, workspace.local_principal(), [folder], IngestOptions(knowledge_base=kb)
    )
    assert not report.errors, report.errors
