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

Line breaks are ``\\n``, ``\\r\\n`` (one break) and a lone ``\\r``. Offsets are Python string
indices (code points), so any Unicode text works; hard cuts avoid separating a character from the
combining marks / joiners that follow it.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field

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
    lines = _Lines(content)
    overlap = min(options.overlap_chars, options.max_chars // 2)
    chunks: list[ChunkSpan] = []
    for section in _parse(lines, kind):
        blocks = [span for first, stop in section.blocks if (span := lines.span(first, stop))]
        for start, end in _pack(content, blocks, options.max_chars, overlap):
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
    lines = _Lines(content)
    sections = [section for section in _parse(lines, kind) if section.level > 0]
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


def _section_ends(sections: list[_Section], starts: list[int], length: int) -> list[int]:
    """End of each section: the start of the next section of the same or a higher level."""
    ends = [length] * len(sections)
    open_sections: list[int] = []
    for index, section in enumerate(sections):
        while open_sections and sections[open_sections[-1]].level >= section.level:
            ends[open_sections.pop()] = starts[index]
        open_sections.append(index)
    return ends


# --------------------------------------------------------------------------------------------
# Lines


_BREAK = re.compile(r"\r\n|\r|\n")
_NON_SPACE = re.compile(r"\S")
_SPACE = re.compile(r"\s")


class _Lines:
    """The line table of a content string.

    ``starts[i]`` / ``ends[i]`` delimit line ``i`` (0-based) without its line break; ``texts[i]``
    is its text, used only to classify lines (a byte order mark is removed from the first one).
    A content ending with a line break has a last, empty line.
    """

    __slots__ = ("content", "ends", "starts", "texts")

    def __init__(self, content: str) -> None:
        self.content = content
        self.texts: list[str] = _BREAK.split(content)
        self.starts: list[int] = [0]
        self.ends: list[int] = []
        if "\r" in content:
            for match in _BREAK.finditer(content):
                self.ends.append(match.start())
                self.starts.append(match.end())
        else:
            position = 0
            for text in self.texts[:-1]:
                position += len(text)
                self.ends.append(position)
                position += 1
                self.starts.append(position)
        self.ends.append(len(content))
        if self.texts[0].startswith("\ufeff"):
            self.texts[0] = self.texts[0].lstrip("\ufeff")

    def __len__(self) -> int:
        return len(self.texts)

    def number_at(self, position: int) -> int:
        """1-based number of the line holding the character at ``position``."""
        return bisect_right(self.starts, position)

    def span(self, first: int, stop: int) -> tuple[int, int] | None:
        """Char range of lines ``first..stop-1`` without surrounding whitespace; None if blank."""
        start, end = self.starts[first], self.ends[stop - 1]
        match = _NON_SPACE.search(self.content, start, end)
        if match is None:
            return None
        start = match.start()
        return start, start + len(self.content[start:end].rstrip())


def _is_blank(text: str) -> bool:
    return not text or text.isspace()


# --------------------------------------------------------------------------------------------
# Sections


@dataclass
class _Section:
    heading_path: tuple[str, ...]
    level: int  # 0 for the part before the first heading
    title: str
    first_line: int  # the heading's first line (0-based)
    blocks: list[tuple[int, int]] = field(default_factory=list)  # line ranges [first, stop)


class _Sections:
    """Collects sections and their blocks while tracking the heading path."""

    def __init__(self) -> None:
        self.sections: list[_Section] = [_Section((), 0, "", 0)]
        self._open: list[tuple[int, str]] = []  # (level, title) of the enclosing headings

    def add_block(self, first: int, stop: int) -> None:
        self.sections[-1].blocks.append((first, stop))

    def open(self, level: int, title: str, first: int, stop: int) -> None:
        """Start a section whose heading occupies lines ``first..stop-1``."""
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, title))
        path = tuple(name for _, name in self._open)
        self.sections.append(_Section(path, level, title, first, [(first, stop)]))


OUTLINE_KINDS = ("markdown", "html", "rst", "pdf")


def _parse(lines: _Lines, kind: str) -> list[_Section]:
    kind = kind.strip().lower()
    if kind in ("markdown", "html"):
        # HTML text is generated (kbmcp.ingest.html): its first line is never front matter.
        return _MarkdownParser(lines, front_matter=kind == "markdown").parse()
    if kind == "rst":
        return _RstParser(lines).parse()
    if kind == "pdf":
        return _parse_paragraphs(lines, _PAGE_MARKER)
    return _parse_paragraphs(lines)


# A PDF page starts at a line `\f[page N]` (see kbmcp.ingest.pdf): a form feed never occurs
# elsewhere in extracted text, so a page's own text cannot pose as a marker.
_PAGE_MARKER = re.compile(r"\f\[page (\d+)\][ \t]*")


def _parse_paragraphs(lines: _Lines, marker: re.Pattern[str] | None = None) -> list[_Section]:
    """Text and code: one section, blocks separated by blank lines. With ``marker``, a line
    matching it opens a level-1 section titled by its text (PDF pages: ``page 2``)."""
    sections = _Sections()
    first: int | None = None
    for index, text in enumerate(lines.texts):
        if marker is not None and marker.fullmatch(text):
            if first is not None:
                sections.add_block(first, index)
                first = None
            sections.open(1, text.strip().strip("[]"), index, index + 1)
        elif _is_blank(text):
            if first is not None:
                sections.add_block(first, index)
                first = None
        elif first is None:
            first = index
    if first is not None:
        sections.add_block(first, len(lines))
    return sections.sections


# --------------------------------------------------------------------------------------------
# Markdown

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT_UNDERLINE = re.compile(r" {0,3}(=+|-+)[ \t]*")
_THEMATIC_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_HTML_RAW_OPEN = re.compile(r" {0,3}<(pre|script|style|textarea)(?:[\s>]|$)", re.IGNORECASE)
_HTML_COMMENT_OPEN = re.compile(r" {0,3}<!--")
# First lines of paragraphs that cannot become a setext heading: list items, block quotes and
# indented code.
_NOT_SETEXT_TITLE = re.compile(r" {0,3}(?:[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|>|\t)| {4}")


def _first_char(text: str) -> str:
    """The first character after up to 3 leading spaces ('' when indented further or empty)."""
    stripped = text[:4].lstrip(" ")
    return stripped[:1] if len(text) - len(text.lstrip(" ")) <= 3 else ""


class _MarkdownParser:
    """A line-based reading of CommonMark block structure, precise enough to find headings.

    Recognised: YAML front matter (skipped: not a block), fenced code blocks (backticks or
    tildes, closed by a fence of the same character at least as long, or unterminated until the
    end), raw HTML ``<pre>`` /
    ``<script>`` / ``<style>`` / ``<textarea>`` blocks and comments, ATX and setext headings,
    thematic breaks and paragraphs. Nothing inside a fence, raw block or front matter is a heading.
    """

    def __init__(self, lines: _Lines, *, front_matter: bool = True) -> None:
        self.texts = lines.texts
        self.out = _Sections()
        self.paragraph: int | None = None  # first line of the open paragraph
        self.paragraph_can_be_title = False
        self.front_matter = front_matter

    def parse(self) -> list[_Section]:
        index = self._front_matter() if self.front_matter else 0
        while index < len(self.texts):
            index = self._line(index)
        self._close_paragraph(len(self.texts))
        return self.out.sections

    def _front_matter(self) -> int:
        if len(self.texts) < 2 or self.texts[0].rstrip() != "---":
            return 0
        for index in range(1, len(self.texts)):
            if self.texts[index].rstrip() in ("---", "..."):
                return index + 1
        return 0

    def _line(self, index: int) -> int:
        """Read the construct starting at line ``index``; return the index of the next line."""
        text = self.texts[index]
        if _is_blank(text):
            self._close_paragraph(index)
            return index + 1
        char = _first_char(text)
        stop: int | None = None
        if char in ("`", "~"):
            stop = self._fence(index, text)
        elif char == "<":
            stop = self._html(index, text)
        elif char == "#":
            stop = self._atx(index, text)
        elif char in ("=", "-"):
            stop = self._setext(index, text)
        if stop is None and char in ("-", "*", "_"):
            stop = self._thematic_break(index, text)
        if stop is None:
            self._paragraph_line(index, text)
            return index + 1
        return stop

    def _close_paragraph(self, stop: int) -> None:
        if self.paragraph is not None:
            self.out.add_block(self.paragraph, stop)
            self.paragraph = None

    def _paragraph_line(self, index: int, text: str) -> None:
        if self.paragraph is None:
            self.paragraph = index
            self.paragraph_can_be_title = not _NOT_SETEXT_TITLE.match(text)

    def _block(self, first: int, stop: int) -> int:
        self._close_paragraph(first)
        self.out.add_block(first, stop)
        return stop

    def _fence(self, index: int, text: str) -> int | None:
        match = _FENCE_OPEN.fullmatch(text)
        if match is None:
            return None
        fence, info = match.group(1), match.group(2)
        if fence[0] == "`" and "`" in info:
            return None
        for stop in range(index + 1, len(self.texts)):
            if _closes_fence(self.texts[stop], fence[0], len(fence)):
                return self._block(index, stop + 1)
        return self._block(index, len(self.texts))

    def _html(self, index: int, text: str) -> int | None:
        raw = _HTML_RAW_OPEN.match(text)
        if raw is not None:
            closing = f"</{raw.group(1).lower()}>"
            return self._block(index, self._find_line(index, raw.end(), closing, lower=True))
        comment = _HTML_COMMENT_OPEN.match(text)
        if comment is not None:
            return self._block(index, self._find_line(index, comment.end(), "-->", lower=False))
        return None

    def _find_line(self, index: int, offset: int, marker: str, *, lower: bool) -> int:
        """Stop (exclusive) of the first line from ``index`` holding ``marker`` (from ``offset``
        on the first line); the end of the document when there is none."""
        for line in range(index, len(self.texts)):
            text = self.texts[line][offset if line == index else 0 :]
            if marker in (text.lower() if lower else text):
                return line + 1
        return len(self.texts)

    def _atx(self, index: int, text: str) -> int | None:
        match = _ATX.fullmatch(text)
        if match is None:
            return None
        title = _without_attributes((match.group(2) or "").strip())
        title = _ATX_CLOSING.sub("", title).strip()
        self._close_paragraph(index)
        self.out.open(len(match.group(1)), title, index, index + 1)
        return index + 1

    def _setext(self, index: int, text: str) -> int | None:
        first = self.paragraph
        if first is None or not self.paragraph_can_be_title:
            return None
        match = _SETEXT_UNDERLINE.fullmatch(text)
        if match is None:
            return None
        title = _without_attributes(" ".join(line.strip() for line in self.texts[first:index]))
        self.paragraph = None
        self.out.open(1 if match.group(1)[0] == "=" else 2, title, first, index + 1)
        return index + 1

    def _thematic_break(self, index: int, text: str) -> int | None:
        if _THEMATIC_BREAK.fullmatch(text) is None:
            return None
        return self._block(index, index + 1)


# mkdocs / Python-Markdown attribute lists after a heading: `{ #install }`, `{: #id .class }`.
_ATTRIBUTE_LIST = re.compile(r"[ \t]*\{:?[ \t]*[#.][^{}]*\}[ \t]*\Z")


def _without_attributes(title: str) -> str:
    return _ATTRIBUTE_LIST.sub("", title).strip()


def _closes_fence(text: str, char: str, length: int) -> bool:
    """Whether ``text`` is a closing fence for an opening fence of ``length`` × ``char``."""
    body = text.lstrip(" ")
    if len(text) - len(body) > 3:
        return False
    body = body.rstrip(" \t")
    return len(body) >= length and not body.strip(char)


# --------------------------------------------------------------------------------------------
# reStructuredText

_RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*[ \t]*")


def _adornment(text: str) -> tuple[str, int] | None:
    """(character, length) when ``text`` is a section adornment line (one repeated punctuation
    character starting in column 1)."""
    if _RST_ADORNMENT.fullmatch(text) is None:
        return None
    return text[0], len(text.rstrip())


class _RstParser:
    """Section titles (underlined, optionally also overlined with the same character) and
    paragraphs. A title must begin a block (first line, after a blank line or after another
    title) and its adornments must be at least as long as its text. Levels follow the order in
    which adornment styles first appear."""

    def __init__(self, lines: _Lines) -> None:
        self.texts = lines.texts
        self.out = _Sections()
        self.styles: list[tuple[str, bool]] = []

    def parse(self) -> list[_Section]:
        paragraph: int | None = None
        index = 0
        while index < len(self.texts):
            text = self.texts[index]
            if _is_blank(text):
                if paragraph is not None:
                    self.out.add_block(paragraph, index)
                    paragraph = None
                index += 1
                continue
            if paragraph is None:
                stop = self._title(index)
                if stop is not None:
                    index = stop
                    continue
                paragraph = index
            index += 1
        if paragraph is not None:
            self.out.add_block(paragraph, len(self.texts))
        return self.out.sections

    def _title(self, index: int) -> int | None:
        """If a title starts at line ``index``, open its section and return the next line."""
        found = self._overlined(index) or self._underlined(index)
        if found is None:
            return None
        stop, style, title = found
        if style not in self.styles:
            self.styles.append(style)
        self.out.open(self.styles.index(style) + 1, title, index, stop)
        return stop

    def _overlined(self, index: int) -> tuple[int, tuple[str, bool], str] | None:
        over = _adornment(self.texts[index])
        if over is None or index + 2 >= len(self.texts):
            return None
        title_line = self.texts[index + 1]
        title = title_line.strip()
        under = _adornment(self.texts[index + 2])
        if not title or _adornment(title_line) or under is None or under[0] != over[0]:
            return None
        if min(over[1], under[1]) < len(title):
            return None
        return index + 3, (over[0], True), title

    def _underlined(self, index: int) -> tuple[int, tuple[str, bool], str] | None:
        text = self.texts[index]
        if index + 1 >= len(self.texts) or text[0].isspace() or _adornment(text):
            return None
        under = _adornment(self.texts[index + 1])
        title = text.strip()
        if under is None or under[1] < len(title):
            return None
        return index + 2, (under[0], False), title


# --------------------------------------------------------------------------------------------
# Packing and cutting


def _pack(
    content: str, blocks: list[tuple[int, int]], max_chars: int, overlap: int
) -> list[tuple[int, int]]:
    """Pack consecutive blocks (stripped char ranges of one section) into chunk ranges.

    A block that fits in the pending chunk joins it; one that fits alone starts a new chunk; one
    that is too large even alone is cut together with the pending chunk (so a heading stays with
    the start of the text under it), and the last piece of the cut becomes the pending chunk.
    """
    spans: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None
    for start, end in blocks:
        if pending is not None and end - pending[0] <= max_chars:
            pending = (pending[0], end)
        elif end - start <= max_chars:
            if pending is not None:
                spans.append(pending)
            pending = (start, end)
        else:
            first = pending[0] if pending is not None else start
            pieces = _cut(content, first, end, max_chars, overlap)
            spans.extend(pieces[:-1])
            pending = pieces[-1]
    if pending is not None:
        spans.append(pending)
    return spans


def _cut(content: str, start: int, end: int, max_chars: int, overlap: int) -> list[tuple[int, int]]:
    """Cut ``content[start:end]`` (stripped) into overlapping pieces of at most ``max_chars``.

    Each piece ends at the last line break that fits, else at the last whitespace, else hard at
    ``max_chars``. The next piece starts about ``overlap`` characters before that cut (snapped to
    a line break or whitespace), but always goes past the previous piece: ``must`` is the first
    non-whitespace character after the previous cut, and every new piece contains it.
    """
    pieces: list[tuple[int, int]] = []
    position = must = start
    while end - position > max_chars:
        limit = position + max_chars
        cut, kind = _find_cut(content, max(position, must) + 1, limit, end, max_chars)
        pieces.append((position, position + len(content[position:cut].rstrip())))
        must = _next_non_space(content, cut, end)
        position = _next_non_space(
            content, _overlap_start(content, position, cut, kind, overlap), end
        )
        if must - position >= max_chars:
            position = must
    pieces.append((position, end))
    return pieces


def _next_non_space(content: str, position: int, end: int) -> int:
    match = _NON_SPACE.search(content, position, end)
    assert match is not None, "a stripped range ends with a non-whitespace character"
    return match.start()


def _find_cut(content: str, low: int, limit: int, end: int, max_chars: int) -> tuple[int, str]:
    """Where to end a piece: an index in ``[low, limit]`` and how it was found.

    The last line break wins, unless the line after it is too long for any chunk: that line must
    be cut anyway, so the piece is filled up to its last whitespace (or hard) instead of ending
    early, which keeps e.g. a heading with the start of a long one-line paragraph.
    """
    index = max(content.rfind("\n", low, limit + 1), content.rfind("\r", low, limit + 1))
    if index >= 0 and not _long_line_after(content, index, end, max_chars):
        return index, "line"
    low = max(low, index + 1)
    space = _last_space(content, low, limit + 1)
    if space >= 0:
        return space, "space"
    return _hard_cut(content, low, limit), "hard"


def _long_line_after(content: str, index: int, end: int, width: int) -> bool:
    """Whether the line after the line break at ``index`` (and before ``end``) is longer than
    ``width``."""
    start = index + 2 if content.startswith("\r\n", index) else index + 1
    stop = min(end, start + width + 1)
    return (
        stop - start > width
        and content.find("\n", start, stop) < 0
        and content.find("\r", start, stop) < 0
    )


def _last_space(content: str, low: int, high: int) -> int:
    """Index of the last whitespace in ``content[low:high]`` (-1 if none); spaces and tabs are
    looked up first, other Unicode whitespace only when there are none."""
    index = max(content.rfind(" ", low, high), content.rfind("\t", low, high))
    if index < 0:
        for match in _SPACE.finditer(content, low, high):
            index = match.start()
    return index


def _hard_cut(content: str, low: int, limit: int) -> int:
    """``limit``, moved back (not below ``low``) so as not to separate a character from the
    combining marks, variation selectors, joiners or skin-tone modifiers that extend it."""
    cut = limit
    while cut > low and _extends_previous(content, cut):
        cut -= 1
    return cut


def _extends_previous(content: str, index: int) -> bool:
    char = content[index]
    return (
        unicodedata.category(char) in ("Mn", "Mc", "Me")
        or char == "\u200d"
        or content[index - 1] == "\u200d"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
    )


def _overlap_start(content: str, position: int, cut: int, kind: str, overlap: int) -> int:
    """Where the piece after ``content[position:cut]`` starts so as to repeat about ``overlap``
    characters: after a line cut, at the first line break in the last ``overlap`` characters;
    after a whitespace or hard cut, at the first whitespace there. Without such a boundary, hard
    cuts overlap mid-word and the others do not overlap."""
    target = max(cut - overlap, position + 1)
    if target >= cut:
        return cut
    if kind == "line":
        breaks = [
            i for i in (content.find("\n", target, cut), content.find("\r", target, cut)) if i >= 0
        ]
        return min(breaks, default=cut)
    match = _SPACE.search(content, target, cut)
    if match is not None:
        return match.start()
    return target if kind == "hard" else cut
