"""What a chunk's vector is computed from: each piece of context stated once."""

from __future__ import annotations

import pytest

from kbmcp.embed.inputs import chunk_embedding_input


@pytest.mark.parametrize(
    ("title", "heading_path", "text", "expected"),
    [
        # The first chunk of a document that starts with its title: the title is already there.
        ("Title", ("Title",), "# Title\n\nbody", "# Title\n\nbody"),
        # A later chunk of the same section: the title says what it is about.
        ("Title", ("Title",), "second chunk body", "Title\nsecond chunk body"),
        # A subsection's first chunk starts with its heading; the title is still added.
        ("Doc", ("Doc", "Install"), "## Install\n\nrun it", "Doc\n## Install\n\nrun it"),
        ("Doc", ("Doc", "Install"), "more install", "Doc > Install\nmore install"),
        # Headings differing from the title are all kept, in order.
        ("Guide", ("Setup", "Linux"), "apt install", "Guide > Setup > Linux\napt install"),
        # No headings (plain text): the title (the file name) alone.
        ("notes.txt", (), "plain text", "notes.txt\nplain text"),
    ],
)
def test_context_is_stated_once(
    title: str, heading_path: tuple[str, ...], text: str, expected: str
) -> None:
    assert chunk_embedding_input(title, heading_path, text) == expected
