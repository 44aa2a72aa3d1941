"""HTML pages as Markdown-shaped text: the main content, its headings as `#` headings.

The main content is the page's `<main>` (else `[role=main]`, `<article>`, `<body>`) without
navigation (DocBook's `navheader` / `navfooter` too), headers, footers, forms, scripts and
styles; an `<aside>` inside it (a Sphinx footnote or sidebar) is kept, unless the main content
is the whole `<body>`. Permalink marks (an in-page link whose text is only `¶`, `#`, `§` or an
icon) are dropped, so they reach no title, heading or citation. Headings become ATX headings,
paragraphs, list items, table rows and quotes become paragraphs (list items start with `- `),
`<pre>` becomes a fenced code block (several `<code>` blocks in one `<pre>` each on lines of
their own). Text lines that Markdown would read as structure are escaped
with a backslash, so the only headings are the page's own. The result is what is stored and
chunked (kind `html`), so citations and outlines carry the page's headings.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

MAIN_SELECTORS = ("main", "[role=main]", "article", "body")
DROPPED = (
    "script, style, noscript, template, nav, header, footer, form, svg, iframe, "
    "button, select, canvas, [role=navigation], [aria-hidden=true], "
    # DocBook's navigation blocks ("Prev | Up | Next", "Home"): its pages have no <main>
    ".navheader, .navfooter"
)
# Asides inside a page's main content are part of it (Sphinx footnotes and sidebars); when the
# main content is the whole <body>, an <aside> is the site's sidebar.
DROPPED_FROM_BODY = "aside"
# An in-page link whose text is only a permalink mark: Sphinx's and MkDocs' `¶`
# (a.headerlink), Node's `#` (a.mark), Docusaurus' and VitePress' `#`, icon-only anchors.
PERMALINK_MARKS = frozenset({"", "¶", "#", "§", "🔗"})  # (zero-width characters removed)
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCKS = frozenset({
    "p", "div", "section", "article", "main", "ul", "ol", "dl", "dt", "dd", "blockquote",
    "table", "thead", "tbody", "tfoot", "tr", "figure", "figcaption", "details", "summary",
    "address", "hr", "body", "center",
})  # fmt: skip
CELLS = frozenset({"td", "th"})
# A Sphinx table of contents (`.. toctree::`): links to other pages, each indexed on its own.
# Dropped from every page, as navigation is; a page that was nothing but headings and tables of
# contents (Sphinx's contents.html, a section's index) is skipped with this reason.
TABLE_OF_CONTENTS = ".toctree-wrapper"
TABLE_OF_CONTENTS_PAGE = "table of contents page"
# A Sphinx rubric (`<p class="rubric">`): an informal heading, such as "Footnotes" before the
# footnotes at the end of a page; written as a heading one level below the one before it, so
# that what follows is cited under it, not under the page's last section.
RUBRIC = "rubric"

_SPACES = re.compile(r"\s+")
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
_STRUCTURE = re.compile(r"(?:[#=`~<>*_+|\\-]|\d{1,9}[.)])")
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class HtmlText:
    content: str
    title: str | None  # the first <h1> of the main content, else <title>
    reason: str | None = None  # why the page is not a document (its text is kept all the same)


def decode_html(data: bytes) -> str | None:
    """UTF-8, else the charset the page declares in a <meta> tag; None when neither works."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        pass
    match = _CHARSET.search(data[:4096])
    if match is None:
        return None
    try:
        return data.decode(codecs.lookup(match.group(1).decode("ascii")).name)
    except (LookupError, UnicodeDecodeError):
        return None


def html_to_text(html: str) -> HtmlText:
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    page_title = _inline(title_node.text()) if title_node is not None else ""
    main = next((node for s in MAIN_SELECTORS if (node := tree.css_first(s)) is not None), None)
    if main is None:
        return HtmlText("", page_title or None)
    dropped = DROPPED if main.tag != "body" else f"{DROPPED}, {DROPPED_FROM_BODY}"
    for node in main.css(dropped):
        node.decompose()
    for link in main.css('a[href^="#"]'):
        if _ZERO_WIDTH.sub("", _inline(link.text())) in PERMALINK_MARKS:
            link.decompose()
    tables_of_contents = main.css(TABLE_OF_CONTENTS)
    for node in tables_of_contents:
        node.decompose()
    writer = _Writer()
    writer.walk(main)
    writer.flush()
    h1 = main.css_first("h1")
    title = _inline(h1.text()) if h1 is not None else ""
    only_headings = all(block.startswith("#") for block in writer.blocks)
    reason = TABLE_OF_CONTENTS_PAGE if tables_of_contents and only_headings else None
    return HtmlText("\n\n".join(writer.blocks), title or page_title or None, reason)


def _inline(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


class _Writer:
    """Turns a node tree into Markdown blocks."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.line: list[str] = []  # inline text of the open paragraph's current line
        self.lines: list[str] = []  # finished lines of the open paragraph (after <br>)
        self.marker = ""  # "- " for the first paragraph of a list item
        self.level = 0  # the level of the last heading written

    def walk(self, node: LexborNode) -> None:
        for child in node.iter(include_text=True):
            tag = child.tag
            if tag == "-text":
                self.line.append(child.text(deep=False) or "")
            elif tag in HEADINGS or (tag == "p" and RUBRIC in _classes(child)):
                self.flush()
                text = _inline(child.text())
                if text:
                    level = HEADINGS.get(tag) or min(6, self.level + 1)
                    self.level = level if tag in HEADINGS else self.level
                    self.blocks.append(f"{'#' * level} {text}")
            elif tag == "pre":
                self.flush()
                self._code(_pre_text(child))
            elif tag == "br":
                self.lines.append("".join(self.line))
                self.line = []
            elif tag == "li":
                self.flush()
                self.marker = "- "
                self.walk(child)
                self.flush()
            elif tag in CELLS:
                self.line.append(" | " if "".join(self.line).strip() else "")
                self.walk(child)
            elif tag in BLOCKS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)

    def flush(self) -> None:
        lines = [_inline(line) for line in [*self.lines, "".join(self.line)]]
        lines = [_escape(line) for line in lines if line]
        self.line, self.lines = [], []
        if lines:
            lines[0] = self.marker + lines[0]
            self.marker = ""
            self.blocks.append("\n".join(lines))

    def _code(self, text: str) -> None:
        code = text.strip("\n").rstrip()
        if not code.strip():
            return
        longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
        fence = "`" * max(3, longest + 1)
        self.blocks.append(f"{fence}\n{code}\n{fence}")


def _classes(node: LexborNode) -> list[str]:
    return (node.attributes.get("class") or "").split()


def _pre_text(pre: LexborNode) -> str:
    """A <pre>'s text. Several <code> blocks in one <pre> (Node's docs: the ES module and the
    CommonJS version of an example) are separate blocks: each starts on a line of its own."""
    blocks = [node for node in pre.iter() if node.tag == "code"]
    if len(blocks) < 2:
        return pre.text()
    return "\n".join(block.text().strip("\n") for block in blocks)


def _escape(line: str) -> str:
    """A backslash before a line start that Markdown would read as a heading, fence, list,
    quote, table or raw HTML."""
    return "\\" + line if _STRUCTURE.match(line) else line
