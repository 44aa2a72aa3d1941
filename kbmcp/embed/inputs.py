"""What text a chunk's vector is computed from."""

from __future__ import annotations

from collections.abc import Sequence


def chunk_embedding_input(title: str, heading_path: Sequence[str], text: str) -> str:
    """The chunk text behind its document title and heading path.

    A chunk rarely names its subject in full ("It runs on port 8765") while its title and headings
    do; putting them first makes the vector say what the chunk is about. The same function feeds
    ingest and re-embedding, and it is the key under which an edited document reuses the vectors
    of unchanged chunks.
    """
    context = " > ".join([title, *heading_path]).strip()
    return f"{context}\n{text}" if context else text
