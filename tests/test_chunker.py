"""Chunking with exact offsets and outlines: hand-made examples and property tests."""

from __future__ import annotations

import itertools
import re
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kbmcp.ingest.chunker import (
    ChunkingOptions,
    ChunkSpan,
    OutlineHeading,
    chunk_document,
    outline,
)

# ---------------------------------------------------------------------------------------------
# Helpers: an independent oracle for line numbers and the invariants every chunking must satisfy


def line_numbers(content: str) -> list[int]:
    """1-based line of each character, with \\n, \\r\\n (one break) and lone \\r as breaks."""
    numbers = []
    line = 1
    for index, char in enumerate(content):
        numbers.append(line)
        if char == "\n" or (char == "\r" and content[index + 1 : index + 2] != "\n"):
            line += 1
    return numbers


def uncovered(content: str, chunks: list[ChunkSpan]) -> list[tuple[int, int]]:
    """Ranges of content with non-whitespace characters that no chunk covers (a leading
    byte-order mark is not text)."""
    gaps = []
    reached = len(content) - len(content.lstrip("\ufeff"))
    for chunk in sorted(chunks, key=lambda c: c.char_start):
        if chunk.char_start > reached and content[reached : chunk.char_start].strip():
            gaps.append((reached, chunk.char_start))
        reached = max(reached, chunk.char_end)
    if content[reached:].strip():
        gaps.append((reached, len(content)))
    return gaps


def front_matter_end(content: str) -> int:
    """End of Markdown front matter (a first line `---` up to a later `---` / `...` line), or 0."""
    texts = re.split(r"\r\n|\r|\n", content)
    if len(texts) < 2 or texts[0].lstrip("\ufeff").rstrip() != "---":
        return 0
    position = len(texts[0])
    for text in texts[1:]:
        position += 2 if content.startswith("\r\n", position) else 1
        position += len(text)
        if text.rstrip() in ("---", "..."):
            return position
    return 0


def check_chunks(
    content: str, chunks: list[ChunkSpan], max_chars: int, kind: str = "markdown"
) -> None:
    """The invariants; for Markdown, the front matter is covered by no chunk."""
    line_of = line_numbers(content)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    starts = [c.char_start for c in chunks]
    assert starts == sorted(set(starts)), "char_start must strictly increase"
    for chunk in chunks:
        assert 0 <= chunk.char_start < chunk.char_end <= len(content)
        assert content[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.text.strip() == chunk.text, "chunks are stripped by their offsets"
        assert len(chunk.text) <= max_chars
        assert chunk.line_start == line_of[chunk.char_start]
        assert chunk.line_end == line_of[chunk.char_end - 1]
        assert isinstance(chunk.heading_path, tuple)
    bom = len(content) - len(content.lstrip("\ufeff"))
    assert all(chunk.char_start >= bom for chunk in chunks), "a leading BOM is in no chunk"
    skipped = front_matter_end(content) if kind == "markdown" else 0
    assert all(chunk.char_start >= skipped for chunk in chunks), "front matter is no chunk"
    assert uncovered(" " * skipped + content[skipped:], chunks) == []


def check_outline(content: str, headings: list[OutlineHeading]) -> None:
    line_of = line_numbers(content)
    for heading in headings:
        assert 0 <= heading.char_start < heading.char_end <= len(content)
        assert heading.heading_path[-1] == heading.title
        assert len(heading.heading_path) <= heading.level
        assert heading.line_start == line_of[heading.char_start]
        assert heading.line_end == line_of[heading.char_end - 1]
    starts = [h.char_start for h in headings]
    assert starts == sorted(set(starts))
    for index, child in enumerate(headings):  # a section contains its subsections
        parents = [h for h in headings[:index] if h.level < child.level]
        if not parents:
            assert child.heading_path == (child.title,)
            continue
        parent = parents[-1]
        assert child.heading_path == (*parent.heading_path, child.title)
        assert parent.char_start < child.char_start
        assert child.char_end <= parent.char_end
    for previous, heading in itertools.pairwise(headings):  # ... and ends before a sibling
        if heading.level <= previous.level:
            assert previous.char_end == heading.char_start


def chunk_paths_match_outline(content: str, kind: str, chunks: list[ChunkSpan]) -> None:
    """A chunk under a heading lies within that heading's section."""
    sections = {h.char_start: h for h in outline(content, kind)}
    for chunk in chunks:
        if not chunk.heading_path:
            continue
        owners = [
            h
            for h in sections.values()
            if h.heading_path == chunk.heading_path
            and h.char_start <= chunk.char_start
            and chunk.char_end <= h.char_end
        ]
        assert owners, chunk


def paths_and_texts(chunks: list[ChunkSpan]) -> list[tuple[tuple[str, ...], str]]:
    return [(c.heading_path, c.text) for c in chunks]


# ---------------------------------------------------------------------------------------------
# Markdown


NESTED = """\
Preamble text.

# Install

Install it.

## From source

Clone the repo.

### Build

Run make.

## With pip

pip install kbmcp

# Usage

Use it.
"""


def test_markdown_nested_headings_paths_and_offsets() -> None:
    chunks = chunk_document(NESTED, "markdown", ChunkingOptions(max_chars=40, overlap_chars=0))
    check_chunks(NESTED, chunks, 40)
    assert paths_and_texts(chunks) == [
        ((), "Preamble text."),
        (("Install",), "# Install\n\nInstall it."),
        (("Install", "From source"), "## From source\n\nClone the repo."),
        (("Install", "From source", "Build"), "### Build\n\nRun make."),
        (("Install", "With pip"), "## With pip\n\npip install kbmcp"),
        (("Usage",), "# Usage\n\nUse it."),
    ]
    build = chunks[3]
    assert (build.char_start, build.char_end) == (
        NESTED.index("### Build"),
        NESTED.index("make.") + 5,
    )
    assert (build.line_start, build.line_end) == (11, 13)


def test_markdown_small_sections_never_share_a_chunk() -> None:
    chunks = chunk_document(NESTED, "markdown")  # everything would fit in 1000 chars
    assert len(chunks) == 6
    assert all(c.text.startswith("#") for c in chunks[1:])


def test_markdown_paragraphs_are_packed_up_to_max_chars() -> None:
    content = "# T\n\n" + "\n\n".join(f"Paragraph number {i}." for i in range(6))
    chunks = chunk_document(content, "markdown", ChunkingOptions(max_chars=50, overlap_chars=10))
    check_chunks(content, chunks, 50)
    assert [c.text for c in chunks] == [
        "# T\n\nParagraph number 0.\n\nParagraph number 1.",
        "Paragraph number 2.\n\nParagraph number 3.",
        "Paragraph number 4.\n\nParagraph number 5.",
    ]
    assert all(c.heading_path == ("T",) for c in chunks)


def test_markdown_atx_details() -> None:
    content = (
        "   ### Indented heading ###\n\n"
        "    # indented code, not a heading\n\n"
        "#hashtag is not a heading\n\n"
        "####### seven is not a heading\n\n"
        "## C# ##\n\n"
        "text"
    )
    headings = outline(content, "markdown")
    assert [(h.level, h.title) for h in headings] == [(3, "Indented heading"), (2, "C#")]
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    assert [c.heading_path for c in chunks] == [("Indented heading",), ("C#",)]
    assert chunks[0].char_start == 3  # leading spaces stripped by offset


def test_markdown_setext_headings() -> None:
    content = "Title\n=====\n\nIntro.\n\nA two-line\nsubtitle\n---\n\nBody.\n\n- item\n---\n\nEnd."
    headings = outline(content, "markdown")
    assert [(h.level, h.title, h.heading_path) for h in headings] == [
        (1, "Title", ("Title",)),
        (2, "A two-line subtitle", ("Title", "A two-line subtitle")),
    ]
    assert headings[1].char_start == content.index("A two-line")
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    assert paths_and_texts(chunks) == [
        (("Title",), "Title\n=====\n\nIntro."),
        (("Title", "A two-line subtitle"), content[content.index("A two-line") :]),
    ]


def test_code_fences_hide_headings() -> None:
    content = (
        "# Real\n\n"
        "```python\n# comment, not a heading\n\n## also not\n```\n\n"
        "~~~~\n# inside tilde fence\n~~~\nstill inside (a shorter fence does not close)\n~~~~~\n\n"
        "````md\n```\n# nested fence text\n```\n````\n\n"
        "Fake\n===\n\n"
        "## Second\n\n"
        "```\n# unterminated fence\n\n# runs to the end\nText\n---\n"
    )
    headings = outline(content, "markdown")
    assert [h.title for h in headings] == ["Real", "Fake", "Second"]
    chunks = chunk_document(content, "markdown", ChunkingOptions(max_chars=60, overlap_chars=0))
    check_chunks(content, chunks, 60)
    assert {c.heading_path for c in chunks} == {("Real",), ("Fake",), ("Fake", "Second")}
    # the fence is one block (its blank line does not split it), packed with the heading
    assert chunks[0].text == "# Real\n\n```python\n# comment, not a heading\n\n## also not\n```"
    assert chunks[-1].text == "```\n# unterminated fence\n\n# runs to the end\nText\n---"


def test_html_blocks_hide_headings() -> None:
    content = "<!--\n# commented out\n-->\n\n<pre>\n# pre text\n</pre>\n\n# Real\n\nx"
    assert [h.title for h in outline(content, "markdown")] == ["Real"]
    check_chunks(content, chunk_document(content, "markdown"), 1000)


def test_front_matter_is_not_a_heading() -> None:
    content = "---\ntitle: Hello\ntags: [a]\n---\nIntro line\n\n# Heading\n\nBody"
    assert [h.title for h in outline(content, "markdown")] == ["Heading"]
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    # the front matter is no chunk: its fields are the title, tags and metadata
    assert paths_and_texts(chunks) == [((), "Intro line"), (("Heading",), "# Heading\n\nBody")]
    # with `...` as the closing line, and a front matter key right above a `---` line
    content = "---\nkey: value\n...\ntext\n---\n"
    headings = outline(content, "markdown")
    assert [(h.level, h.title) for h in headings] == [(2, "text")]
    assert headings[0].char_start == content.index("text")


def test_front_matter_alone_yields_no_chunk_and_its_lines_count() -> None:
    content = "---\ntitle: Only\n---\n\n# Body\n\ntext\n"
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    assert [(c.text, c.line_start, c.line_end) for c in chunks] == [("# Body\n\ntext", 5, 7)]
    assert chunk_document("---\ntitle: Only\n---\n", "markdown") == []
    # front matter is a Markdown notion: a text file keeps those lines
    assert chunk_document("---\ntitle: x\n---\n", "text")[0].text == "---\ntitle: x\n---"


def test_mkdocs_anchors_are_stripped_from_headings() -> None:
    content = (
        "# Install { #install }\n\nIntro.\n\n## From source {#source}\n\nClone.\n\n"
        "Setext title {: #setext .wide }\n-------------\n\nBody.\n\n"
        "## Braces {like this} stay\n\nx\n\n## Closing ## {#closing}\n"
    )
    assert [h.title for h in outline(content, "markdown")] == [
        "Install",
        "From source",
        "Setext title",
        "Braces {like this} stay",
        "Closing",
    ]
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    assert chunks[1].heading_path == ("Install", "From source")
    assert chunks[1].text.startswith("## From source {#source}")  # the text itself is exact


def test_pdf_pages_are_sections_named_by_page() -> None:
    content = "\f[page 1]\n\nFirst page text.\nSecond line.\n\n\f[page 3]\n\n[page 9]\nThird.\n"
    chunks = chunk_document(content, "pdf")
    check_chunks(content, chunks, 1000, "pdf")
    assert paths_and_texts(chunks) == [
        (("page 1",), "[page 1]\n\nFirst page text.\nSecond line."),
        (("page 3",), "[page 3]\n\n[page 9]\nThird."),  # no form feed: page text, no marker
    ]
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 4), (6, 9)]
    headings = outline(content, "pdf")
    check_outline(content, headings)
    assert [(h.title, h.char_start, h.line_start) for h in headings] == [
        ("page 1", 0, 1),
        ("page 3", content.index("\f[page 3]"), 6),
    ]
    # a page too long for one chunk: every piece names its page
    long_page = "\f[page 2]\n\n" + "word " * 400
    pieces = chunk_document(long_page, "pdf", ChunkingOptions(300, 30))
    check_chunks(long_page, pieces, 300, "pdf")
    assert len(pieces) > 2 and {c.heading_path for c in pieces} == {("page 2",)}


def test_html_kind_reads_markdown_headings_without_front_matter() -> None:
    content = "---\n\n# Title\n\ntext\n"  # (generated HTML text never starts so; still exact)
    chunks = chunk_document(content, "html")
    check_chunks(content, chunks, 1000, "html")
    assert chunks[0].text == "---"
    assert [h.title for h in outline(content, "html")] == ["Title"]


def test_unterminated_front_matter_is_a_thematic_break() -> None:
    content = "---\nno closing line\n\nTitle\n=====\nBody"
    assert [h.title for h in outline(content, "markdown")] == ["Title"]


def test_unicode_offsets() -> None:
    content = "# 安装 🚀\n\n中文段落，没有空格。👩‍👩‍👧 family\n\n## Café e\u0301\n\nnaïve 😀😀😀\n"
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    assert paths_and_texts(chunks) == [
        (("安装 🚀",), "# 安装 🚀\n\n中文段落，没有空格。👩‍👩‍👧 family"),
        (("安装 🚀", "Café e\u0301"), "## Café e\u0301\n\nnaïve 😀😀😀"),
    ]
    assert chunks[1].char_start == content.index("## Café")
    assert (chunks[1].line_start, chunks[1].line_end) == (5, 7)


def test_hard_cut_keeps_combining_marks_and_joiners() -> None:
    content = "e\u0301" * 50 + "👩‍👩‍👧" * 20
    chunks = chunk_document(content, "text", ChunkingOptions(max_chars=7, overlap_chars=0))
    check_chunks(content, chunks, 7)
    for chunk in chunks:
        assert chunk.text[0] not in "\u0301\u200d"
        assert chunk.text[-1] != "\u200d"
    assert "".join(c.text for c in chunks) == content  # no overlap requested: pieces tile


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline: str) -> None:
    lines = ["# One", "", "alpha", "beta", "", "Two", "---", "", "gamma"]
    content = newline.join(lines) + newline
    chunks = chunk_document(content, "markdown")
    check_chunks(content, chunks, 1000)
    assert [(c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        (("One",), 1, 4),
        (("One", "Two"), 6, 9),
    ]
    assert chunks[0].text == newline.join(lines[:4])
    headings = outline(content, "markdown")
    assert [(h.line_start, h.line_end) for h in headings] == [(1, 9), (6, 9)]
    assert headings[1].char_start == content.index("Two")
    assert headings[1].char_end == len(content)


def test_mixed_line_endings_line_numbers() -> None:
    content = "a\r\nb\rc\n\r\nd\r\re"
    chunks = chunk_document(content, "text", ChunkingOptions(max_chars=1, overlap_chars=0))
    assert [(c.text, c.line_start) for c in chunks] == [
        ("a", 1),
        ("b", 2),
        ("c", 3),
        ("d", 5),
        ("e", 7),
    ]
    check_chunks(content, chunks, 1)


# ---------------------------------------------------------------------------------------------
# Oversize blocks and lines


def test_oversize_code_block_is_cut_at_line_boundaries_with_overlap() -> None:
    code = "\n".join(f"value_{i:02d} = compute({i})  # {'x' * (i % 5 + 1)}" for i in range(40))
    content = f"# Code\n\nSee below.\n\n```python\n{code}\n```\n\nAfter the code."
    options = ChunkingOptions(max_chars=200, overlap_chars=60)
    chunks = chunk_document(content, "markdown", options)
    check_chunks(content, chunks, 200)
    assert len(chunks) >= 6
    assert chunks[0].text.startswith("# Code\n\nSee below.\n\n```python\nvalue_00")
    assert chunks[-1].text == "After the code."  # a block that fits is not cut
    code_lines = set(code.split("\n")) | {"```python", "```", "# Code", "See below.", ""}
    for previous, chunk in itertools.pairwise(chunks):
        # whole lines only: every piece starts and ends at a line boundary
        assert chunk.char_start == 0 or content[chunk.char_start - 1] == "\n"
        assert content[chunk.char_end : chunk.char_end + 1] in ("\n", "")
        assert set(chunk.text.split("\n")) <= code_lines | {"After the code."}
        if chunk is not chunks[-1]:
            overlap = previous.char_end - chunk.char_start
            assert 0 < overlap <= 60
    assert all(c.heading_path == ("Code",) for c in chunks)


def test_oversize_single_line_is_cut_at_whitespace_with_overlap() -> None:
    words = [f"word{i}" for i in range(400)]
    content = "# Long\n" + " ".join(words) + "\n\n## Next\n\nshort"
    options = ChunkingOptions(max_chars=100, overlap_chars=30)
    chunks = chunk_document(content, "markdown", options)
    check_chunks(content, chunks, 100)
    long_chunks = [c for c in chunks if c.heading_path == ("Long",)]
    assert long_chunks[0].text.startswith("# Long\nword0 word1")  # the heading stays with text
    for previous, chunk in itertools.pairwise(long_chunks):
        assert content[chunk.char_start - 1] == " "  # starts at a word boundary
        assert content[chunk.char_end] in " \n"  # ends at a word boundary
        overlap = previous.char_end - chunk.char_start
        assert 0 < overlap <= 30
        assert len(chunk.text) >= 60  # no tiny slivers
    assert chunks[-1].heading_path == ("Long", "Next")
    assert chunks[-1].text == "## Next\n\nshort"


def test_line_without_whitespace_is_cut_hard() -> None:
    content = "x" * 2500
    chunks = chunk_document(content, "text", ChunkingOptions(max_chars=1000, overlap_chars=100))
    check_chunks(content, chunks, 1000)
    assert [(c.char_start, c.char_end) for c in chunks] == [(0, 1000), (900, 1900), (1800, 2500)]
    chunks = chunk_document(content, "text", ChunkingOptions(max_chars=1000, overlap_chars=0))
    assert [(c.char_start, c.char_end) for c in chunks] == [(0, 1000), (1000, 2000), (2000, 2500)]


def test_overlap_is_capped_at_half_of_max_chars() -> None:
    content = "y" * 100
    chunks = chunk_document(content, "text", ChunkingOptions(max_chars=10, overlap_chars=100))
    check_chunks(content, chunks, 10)
    assert [c.char_start for c in chunks][:3] == [0, 5, 10]


def test_very_long_document_is_fully_covered() -> None:
    section = (
        "## Section {i}\n\n"
        + "Some prose about topic {i}, wrapped at a\nreasonable width so it has lines.\n\n" * 5
        + "```\n"
        + "# code line {i}\n" * 30
        + "```\n\n"
        + "A long line {i} "
        + "lorem ipsum " * 150
        + "\n\n"
    )
    content = "# Book\n\n" + "".join(section.replace("{i}", str(i)) for i in range(800))
    assert len(content) > 2_000_000
    started = time.perf_counter()
    chunks = chunk_document(content, "markdown")
    elapsed = time.perf_counter() - started
    assert elapsed < 5  # ~0.1 s here; catches quadratic behaviour, not a benchmark
    assert len(chunks) > len(content) // 1000
    assert uncovered(content, chunks) == []
    assert all(len(c.text) <= 1000 and content[c.char_start : c.char_end] == c.text for c in chunks)
    assert chunks[-1].heading_path == ("Book", "Section 799")
    assert chunks[-1].char_end == len(content.rstrip())
    assert len(outline(content, "markdown")) == 801


# ---------------------------------------------------------------------------------------------
# reStructuredText, text and code

RST = """\
=======
 Guide
=======

Intro.

Install
=======

Text.

From source
-----------

Steps.

Details
~~~~~~~

More.

Usage
=====

Done.
"""


def test_rst_headings_levels_by_first_appearance() -> None:
    headings = outline(RST, "rst")
    assert [(h.level, h.title, h.heading_path) for h in headings] == [
        (1, "Guide", ("Guide",)),
        (2, "Install", ("Guide", "Install")),
        (3, "From source", ("Guide", "Install", "From source")),
        (4, "Details", ("Guide", "Install", "From source", "Details")),
        (2, "Usage", ("Guide", "Usage")),
    ]
    check_outline(RST, headings)
    chunks = chunk_document(RST, "rst")
    check_chunks(RST, chunks, 1000)
    assert paths_and_texts(chunks) == [
        (("Guide",), "=======\n Guide\n=======\n\nIntro."),
        (("Guide", "Install"), "Install\n=======\n\nText."),
        (("Guide", "Install", "From source"), "From source\n-----------\n\nSteps."),
        (("Guide", "Install", "From source", "Details"), "Details\n~~~~~~~\n\nMore."),
        (("Guide", "Usage"), "Usage\n=====\n\nDone."),
    ]


def test_rst_non_titles() -> None:
    content = (
        "Too long a title\n=====\n\n"  # underline shorter than the title
        "paragraph line\nTitle\n-----\n\n"  # not at the start of a block
        "  indented\n  --------\n\n"  # a title starts in column 1
        "text::\n\n    literal\n    -------\n\n"
        "----------\n\n"  # a transition
        "Real\n^^^^\n"
    )
    assert [h.title for h in outline(content, "rst")] == ["Real"]
    check_chunks(content, chunk_document(content, "rst", ChunkingOptions(30, 5)), 30)


def test_text_and_code_have_no_headings() -> None:
    content = "# not a heading in text\n\npara two\nline two\n\n\n\npara three\n"
    for kind in ("text", "code", "unknown-kind"):
        chunks = chunk_document(content, kind, ChunkingOptions(max_chars=40, overlap_chars=5))
        check_chunks(content, chunks, 40)
        assert [c.text for c in chunks] == [
            "# not a heading in text",
            "para two\nline two\n\n\n\npara three",
        ]
        assert all(c.heading_path == () for c in chunks)
        assert outline(content, kind) == []


def test_code_blocks_are_separated_by_blank_lines() -> None:
    content = "import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n"
    chunks = chunk_document(content, "code", ChunkingOptions(max_chars=30, overlap_chars=5))
    check_chunks(content, chunks, 30)
    assert [c.text for c in chunks] == [
        "import os",
        "def f():\n    return 1",
        "def g():\n    return 2",
    ]


@pytest.mark.parametrize("kind", ["markdown", "rst", "text", "code"])
@pytest.mark.parametrize("content", ["", "   ", "\n\n\r\n", "\t \u3000\n"])
def test_empty_and_blank_documents(kind: str, content: str) -> None:
    assert chunk_document(content, kind) == []
    assert outline(content, kind) == []


def test_invalid_options() -> None:
    with pytest.raises(ValueError):
        ChunkingOptions(max_chars=0)
    with pytest.raises(ValueError):
        ChunkingOptions(overlap_chars=-1)


# ---------------------------------------------------------------------------------------------
# Outline

OUTLINE_DOC = (
    "Intro\n\n# A\n\ntext a\n\n## A.1\n\ntext a1\n\n### A.1.a\n\n## A.2\n\n# B\n\ntext b\n"
)


def test_outline_ranges_exact() -> None:
    headings = outline(OUTLINE_DOC, "markdown")
    assert headings == [
        OutlineHeading(1, "A", ("A",), 7, 56, 3, 14),
        OutlineHeading(2, "A.1", ("A", "A.1"), 20, 48, 7, 12),
        OutlineHeading(3, "A.1.a", ("A", "A.1", "A.1.a"), 37, 48, 11, 12),
        OutlineHeading(2, "A.2", ("A", "A.2"), 48, 56, 13, 14),
        OutlineHeading(1, "B", ("B",), 56, 68, 15, 17),
    ]
    assert len(OUTLINE_DOC) == 68
    assert OUTLINE_DOC[7:10] == "# A"
    assert OUTLINE_DOC[20:26] == "## A.1"
    assert OUTLINE_DOC[37:46] == "### A.1.a"
    assert OUTLINE_DOC[48:54] == "## A.2"
    assert OUTLINE_DOC[56:] == "# B\n\ntext b\n"
    check_outline(OUTLINE_DOC, headings)


def test_outline_with_crlf() -> None:
    content = OUTLINE_DOC.replace("\n", "\r\n")
    headings = outline(content, "markdown")
    expected_lines = [(h.line_start, h.line_end) for h in outline(OUTLINE_DOC, "markdown")]
    assert [(h.line_start, h.line_end) for h in headings] == expected_lines
    assert content[headings[1].char_start : headings[1].char_end].startswith("## A.1\r\n")
    assert content[headings[1].char_start : headings[1].char_end].endswith("### A.1.a\r\n\r\n")
    check_outline(content, headings)


# ---------------------------------------------------------------------------------------------
# Property tests

_WORDS = [
    "alpha",
    "beta",
    "Gamma",
    "😀",
    "👩‍👩‍👧",
    "中文字符",
    "e\u0301",
    "naïve",
    "x" * 40,
    "#",
    "##",
    "-",
    "=",
    "`",
    "*",
    ":",
    "\t",
    "\u3000",
]
_TITLES = st.sampled_from(["Intro", "Setup", "Usage 😀", "中文", "API", "Notes"])
_FAKE_LINES = ["# FAKE", "## FAKE", "FAKE", "===", "---", "", "    x = 1", "😀 中文", "  ~~"]
_PAGES = ["\f[page 1]", "\f[page 2]", "\f[page 10]", "[page 3]", "\f", "## Setup { #setup }"]


@st.composite
def _line(draw: st.DrawFn) -> str:
    indent = draw(st.sampled_from(["", "", " ", "    "]))
    return indent + " ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12)))


@st.composite
def _fence(draw: st.DrawFn, *, closed: bool) -> list[str]:
    """A fenced block whose lines look like headings; only the last fence may be unclosed."""
    fence = draw(st.sampled_from(["```", "~~~", "````"]))
    body = draw(st.lists(st.sampled_from(_FAKE_LINES), max_size=8))
    return [fence + draw(st.sampled_from(["", "python"])), *body] + ([fence] if closed else [])


@st.composite
def _element(draw: st.DrawFn) -> list[str]:
    kind = draw(st.integers(0, 8))
    if kind == 8:
        return [draw(st.sampled_from(_PAGES))]
    if kind == 0:
        return [f"{'#' * draw(st.integers(1, 6))} {draw(_TITLES)}"]
    if kind == 1:
        return [draw(_TITLES), draw(st.sampled_from(["===", "---", "~~~~~~~~", "^^^^^^^^"]))]
    if kind == 2:
        return draw(_fence(closed=True))
    if kind == 3:
        return [" ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=20, max_size=80)))]
    if kind == 4:
        return [""] * draw(st.integers(1, 3))
    return draw(st.lists(_line(), min_size=1, max_size=5))


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["---", "title: x", "---"]
    for element in draw(st.lists(_element(), max_size=14)):
        lines += element
    if draw(st.booleans()):
        lines += draw(_fence(closed=False))
    separators = draw(
        st.lists(
            st.sampled_from(["\n", "\n", "\r\n", "\r"]), min_size=len(lines), max_size=len(lines)
        )
    )
    return "".join(line + sep for line, sep in zip(lines, separators, strict=True))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=documents(),
    kind=st.sampled_from(["markdown", "html", "rst", "pdf", "text", "code"]),
    max_chars=st.integers(1, 300),
    overlap=st.integers(0, 200),
)
def test_chunking_invariants(content: str, kind: str, max_chars: int, overlap: int) -> None:
    chunks = chunk_document(content, kind, ChunkingOptions(max_chars, overlap))
    check_chunks(content, chunks, max_chars, kind)
    if kind in ("markdown", "html", "rst", "pdf"):
        headings = outline(content, kind)
        check_outline(content, headings)
        chunk_paths_match_outline(content, kind, chunks)
    if kind in ("markdown", "html"):
        assert not any("FAKE" in c.heading_path for c in chunks), "a fence line became a heading"


@settings(max_examples=200, deadline=None)
@given(content=st.text(max_size=400), max_chars=st.integers(1, 120), overlap=st.integers(0, 60))
# Found by hypothesis: a lone byte-order mark was neither a chunk nor skipped consistently
# (with other text after it, a chunk began with it).
@example(content="\ufeff", max_chars=1, overlap=0)
@example(content="\ufeffab", max_chars=1, overlap=0)
def test_chunking_invariants_arbitrary_text(content: str, max_chars: int, overlap: int) -> None:
    for kind in ("markdown", "html", "rst", "pdf", "text"):
        check_chunks(
            content,
            chunk_document(content, kind, ChunkingOptions(max_chars, overlap)),
            max_chars,
            kind,
        )
        check_outline(content, outline(content, kind))
