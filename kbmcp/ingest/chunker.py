"""Structure-aware chunking with exact offsets, and document outlines.

A document is cut into *sections* at its headings (Markdown ATX and setext headings,
reStructuredText adorned titles, the page markers of PDF text), each section into *blocks* (the
heading itself, paragraphs, fenced code blocks), and consecutive blocks of one section are packed
into chunks of at most ``max_chars`` characters. A block too large for one chunk is cut at line
boundaries, a line too large at whitespace, and a run without whitespace hard at ``max_chars``;
the pieces of such a cut overlap by about ``overlap_chars``.

Invariants (checked by the property tests):

- ``content[c.char_start:c.char_end] == c.text`` for every chunk; texts never start or end with
  whitespace and are never empty;
- ordinals are ``0..n-1`` and ``char_start`` strictly increases;
- every non-whitespace character of the content lies in at least one chunk, except Markdown front
  matter: its fields fill the document's title, tags and metadata, so it is not searchable text;
- every chunk is at most ``max_chars`` characters long;
- a chunk never spans two sections, and the chunk that starts a section contains its heading.

Kinds: ``markdown``; ``html`` (HTML stored as Markdown-shaped text, see ``kbmcp.ingest.html``);
``rst``; ``pdf`` (a section per page, see ``kbmcp.ingest.pdf``); ``text`` and ``code``
(paragraphs only). Markdown headings lose a trailing mkdocs attribute list (``{ #anchor }``).

Modules: lines.py (the line table, sections), sections.py (the heading parsers per kind),
cutting.py (packing blocks into chunks, cutting oversize blocks); this one assembles them.

Line breaks are ``\\n``, ``\\r\\n`` (one break) and a lone ``\\r``. Offsets are Python string
indices (code points), so any Unicode text works; hard cuts avoid separating a character from the
combining marks / joiners that follow it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbmcp.ingest.cutting import pack_blocks
from kbmcp.ingest.lines import Lines, Section
from kbmcp.ingest.sections import OUTLINE_KINDS, parse_sections

__all__ = [
    "CHUNKER_VERSION",
    "ChunkSpan",
    "ChunkingOptions",
    "OutlineHeading",
    "chunk_document",
    "chunking_signature",
    "outline",
]

# Bumped whenever the same content and options give other chunks (boundaries or heading paths):
# ingest re-chunks a document whose chunks came from another version on its next add.
# 2: front matter is no chunk; mkdocs attribute lists leave heading titles; PDF pages.
CHUNKER_VERSION = 2


@dataclass(frozen=True)
class ChunkSpan:
    ordinal: int  # 0-based position in the document
    heading_path: tuple[str, ...]  # e.g. ("Install", "From source"); () before any heading
    char_start: int  # offsets into the document content (Python str indices)
    char_end: int  # exclusive; content[char_start:char_end] == text
    line_start: int  # 1-based line of char_start
    line_end: int  # 1-based line of the last character of the chunk
    text: str


@dataclass(frozen=True)
class ChunkingOptions:
    """Chunk size limits, in characters.

    ``overlap_chars`` only applies between the pieces of a block (or line) that had to be cut; it
    is capped at ``max_chars // 2`` so that every piece makes real progress.
    """

    # Measured on SciFact (docs/retrieval-quality.md), hybrid nDCG@10: 600/80 0.7219, 1000/100
    # 0.7232, 2000/200 0.7232; lexical prefers long chunks, the default model short ones (it
    # reads at most 256 tokens): 1000 keeps both channels near their best.
    max_chars: int = 1000
    overlap_chars: int = 100

    def __post_init__(self) -> None:
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {self.max_chars}")
        if self.overlap_chars < 0:
            raise ValueError(f"overlap_chars must not be negative, got {self.overlap_chars}")


def chunking_signature(options: ChunkingOptions) -> list[int]:
    """What decides the chunks of a content besides its kind: version and sizes."""
    return [CHUNKER_VERSION, options.max_chars, options.overlap_chars]


@dataclass(frozen=True)
class OutlineHeading:
    level: int
    title: str
    heading_path: tuple[str, ...]
    char_start: int  # section start (the heading line)
    char_end: (
        int  # section end: start of the next heading of the same or higher level, or len(content)
    )
    line_start: int
    line_end: int


def chunk_document(
    content: str, kind: str, options: ChunkingOptions = ChunkingOptions()
) -> list[ChunkSpan]:
    """Cut ``content`` into chunks; ``kind`` is markdown, html, rst, pdf, text or code (else:
    text)."""
    lines = Lines(content)
    overlap = min(options.overlap_chars, options.max_chars // 2)
    chunks: list[ChunkSpan] = []
    for section in parse_sections(lines, kind):
        blocks = [span for first, stop in section.blocks if (span := lines.span(first, stop))]
        for start, end in pack_blocks(content, blocks, options.max_chars, overlap):
            chunks.append(
                ChunkSpan(
                    ordinal=len(chunks),
                    heading_path=section.heading_path,
                    char_start=start,
                    char_end=end,
                    line_start=lines.number_at(start),
                    line_end=lines.number_at(end - 1),
                    text=content[start:end],
                )
            )
    return chunks


def outline(content: str, kind: str) -> list[OutlineHeading]:
    """The heading tree of a markdown, html, rst or pdf document, flattened in document order.

    Each section's range starts at its heading (for setext / overlined titles: the first line of
    the title) and ends where the next heading of the same or a higher level (smaller number)
    starts, so it includes its subsections. A PDF's outline is its pages. Text and code
    documents have no outline.
    """
    if kind.strip().lower() not in OUTLINE_KINDS:
        return []
    lines = Lines(content)
    sections = [section for section in parse_sections(lines, kind) if section.level > 0]
    starts = [lines.starts[section.first_line] for section in sections]
    ends = _section_ends(sections, starts, len(content))
    return [
        OutlineHeading(
            level=section.level,
            title=section.title,
            heading_path=section.heading_path,
            char_start=start,
            char_end=end,
            line_start=lines.number_at(start),
            line_end=lines.number_at(max(end - 1, start)),
        )
        for section, start, end in zip(sections, starts, ends, strict=True)
    ]


def _section_ends(sections: list[Section], starts: list[int], length: int) -> list[int]:
    """End of each section: the start of the next section of the same or a higher level."""
    ends = [length] * len(sections)
    open_sections: list[int] = []
    for index, section in enumerate(sections):
        while open_sections and sections[open_sections[-1]].level >= section.level:
            ends[open_sections.pop()] = starts[index]
        open_sections.append(index)
    return ends
