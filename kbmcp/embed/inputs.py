"""What text a chunk's vector is computed from."""

from __future__ import annotations

import re
from collections.abc import Sequence

_HEADING_LINE = re.compile(r"\A\s*(?:#{1,6}\s+)?(?P<title>[^\n]*?)\s*#*\s*(?:\n|\Z)")


def chunk_embedding_input(title: str, heading_path: Sequence[str], text: str) -> str:
    """The chunk text behind the document title and heading path it does not already state.

    A chunk rarely names its subject in full ("It runs on port 8765") while its title and
    headings do; putting them first makes the vector say what the chunk is about. Each is stated
    once: a heading equal to the title, or the heading the chunk itself starts with, is not
    repeated (MiniLM reads only 256 tokens; on SciFact this took hybrid nDCG@10 from 0.7232 to
    0.7268, docs/retrieval-quality.md). The same function feeds ingest and re-embedding, and it
    is the key under which an edited document reuses the vectors of unchanged chunks.
    """
    context = [title.strip()]
    for heading in heading_path:
        if heading.strip() and heading.strip().casefold() != context[-1].casefold():
            context.append(heading.strip())
    first = _HEADING_LINE.match(text)
    if first and first["title"].strip().casefold() == context[-1].casefold():
        context.pop()  # the chunk starts with that heading itself
    prefix = " > ".join(c for c in context if c)
    return f"{prefix}\n{text}" if prefix else text
