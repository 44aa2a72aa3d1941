"""From file text to document fields: kind, front matter (title, tags, metadata) and title."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdx", ".mdown", ".mkd"}
RST_SUFFIXES = {".rst", ".rest"}
TEXT_SUFFIXES = {".txt", ".text", ".log", ""}
CODE_SUFFIXES = {
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".c", ".h",
    ".cc", ".cpp", ".hpp", ".java", ".kt", ".scala", ".rb", ".php", ".cs", ".swift", ".m",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".sql", ".r", ".jl", ".lua", ".pl", ".hs",
    ".ex", ".exs", ".erl", ".clj", ".dart", ".vue", ".svelte", ".css", ".scss", ".html",
    ".xml", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".proto", ".tf", ".zig",
}  # fmt: skip

_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(?P<body>.*?)(?:\r?\n)(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S
)
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<title>.+?)[ \t#]*$", re.M)
_RST_TITLE = re.compile(
    r"^(?P<title>\S.*?)[ \t]*\r?\n(?P<rule>[=\-~^\"'`#*+])(?P=rule){2,}[ \t]*$", re.M
)


@dataclass(frozen=True)
class ParsedDocument:
    kind: str
    title: str
    tags: list[tuple[str, str]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warning: str | None = None


def detect_kind(relative_path: str) -> str:
    suffix = PurePosixPath(relative_path).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    if suffix in CODE_SUFFIXES:
        return "code"
    return "text"


def parse_document(text: str, relative_path: str) -> ParsedDocument:
    kind = detect_kind(relative_path)
    front: dict[str, Any] = {}
    warning = None
    if kind == "markdown":
        front, warning = _front_matter(text)
    metadata = {
        key: _jsonable(value) for key, value in front.items() if key not in ("title", "tags")
    }
    title = front.get("title")
    if not isinstance(title, str) or not title.strip():
        title = _first_heading(text, kind) or PurePosixPath(relative_path).name
    return ParsedDocument(
        kind=kind,
        title=title.strip(),
        tags=_tags(front.get("tags")),
        metadata=metadata,
        warning=warning,
    )


def parse_pairs(values: list[str] | tuple[str, ...], *, option: str) -> list[tuple[str, str]]:
    """Parse `key=value` strings (from --tag / --meta); raises ValueError naming the bad one."""
    pairs = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} expects key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def _front_matter(text: str) -> tuple[dict[str, Any], str | None]:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, None
    try:
        loaded = yaml.safe_load(match["body"])
    except yaml.YAMLError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        return {}, f"front matter ignored: {first_line}"
    if loaded is None:
        return {}, None
    if not isinstance(loaded, dict):
        return {}, "front matter ignored: not a mapping"
    return {str(key): value for key, value in loaded.items()}, None


def _first_heading(text: str, kind: str) -> str | None:
    body = text
    if kind == "markdown":
        match = _FRONT_MATTER.match(text)
        body = text[match.end() :] if match else text
        heading = _ATX_HEADING.search(_without_fences(body))
        return heading["title"].strip() if heading else None
    if kind == "rst":
        heading = _RST_TITLE.search(body)
        return heading["title"].strip() if heading else None
    return None


def _without_fences(text: str) -> str:
    """Blank out fenced code so a `# comment` in a code block is not taken for the title."""
    return re.sub(r"^ {0,3}(```|~~~).*?^ {0,3}\1", "", text, flags=re.M | re.S)


def _tags(value: Any) -> list[tuple[str, str]]:
    """Front matter `tags`: a list (`[a, b]` -> tag=a, tag=b), a mapping, or a comma string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [("tag", part.strip()) for part in value.split(",") if part.strip()]
    if isinstance(value, dict):
        return [(str(k), _tag_value(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [("tag", _tag_value(item)) for item in value if item is not None]
    return [("tag", _tag_value(value))]


def _tag_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _jsonable(value: Any) -> Any:
    """YAML can hold dates and other non-JSON values; metadata is stored as JSON."""
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
