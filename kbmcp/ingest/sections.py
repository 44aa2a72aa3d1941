"""Documents into sections at their headings: Markdown (and Markdown-shaped HTML text),
reStructuredText, PDF pages, and paragraphs for text and code (used by chunker.py)."""

from __future__ import annotations

import re

from kbmcp.ingest.lines import Lines, Section, Sections, is_blank

OUTLINE_KINDS = ("markdown", "html", "rst", "pdf")


def parse_sections(lines: Lines, kind: str) -> list[Section]:
    kind = kind.strip().lower()
    if kind in ("markdown", "html"):
        # HTML text is generated (kbmcp.ingest.html): its first line is never front matter.
        return _MarkdownParser(lines, front_matter=kind == "markdown").parse()
    if kind == "rst":
        return _RstParser(lines).parse()
    if kind == "pdf":
        return _parse_paragraphs(lines, _PAGE_MARKER)
    return _parse_paragraphs(lines)


# A PDF page starts at a line `\f[page N]` or `\f[page N (label)]` (see kbmcp.ingest.pdf): a
# form feed never occurs elsewhere in extracted text, so a page's own text cannot pose as one.
_PAGE_MARKER = re.compile(r"\f\[page (\d+)(?: \([^()\]\n]*\))?\][ \t]*")


def _parse_paragraphs(lines: Lines, marker: re.Pattern[str] | None = None) -> list[Section]:
    """Text and code: one section, blocks separated by blank lines. With ``marker``, a line
    matching it opens a level-1 section titled by its text (PDF pages: ``page 2``)."""
    sections = Sections()
    first: int | None = None
    for index, text in enumerate(lines.texts):
        if marker is not None and marker.fullmatch(text):
            if first is not None:
                sections.add_block(first, index)
                first = None
            sections.open(1, text.strip().strip("[]"), index, index + 1)
        elif is_blank(text):
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

    def __init__(self, lines: Lines, *, front_matter: bool = True) -> None:
        self.texts = lines.texts
        self.out = Sections()
        self.paragraph: int | None = None  # first line of the open paragraph
        self.paragraph_can_be_title = False
        self.front_matter = front_matter

    def parse(self) -> list[Section]:
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
        if is_blank(text):
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

    def __init__(self, lines: Lines) -> None:
        self.texts = lines.texts
        self.out = Sections()
        self.styles: list[tuple[str, bool]] = []

    def parse(self) -> list[Section]:
        paragraph: int | None = None
        index = 0
        while index < len(self.texts):
            text = self.texts[index]
            if is_blank(text):
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
