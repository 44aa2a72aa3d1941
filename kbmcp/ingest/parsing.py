"""From file text to document fields: kind, front matter (title, tags, metadata) and title."""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from kbmcp.ingest.chunker import outline
from kbmcp.ingest.formats import kind_of

_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(?P<body>.*?)(?:\r?\n)(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S
)


# Bumped whenever the same text gives another kind, title, tags or metadata: files recorded as
# unchanged by their signature (kbmcp/store/ingest.py) are then read again.
PARSING_VERSION = 1

# libyaml's safe loader when PyYAML was built with it (~10x faster), else the pure-Python one.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ParsedDocument:
    kind: str
    title: str
    tags: list[tuple[str, str]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warning: str | None = None


def detect_kind(relative_path: str) -> str:
    """The kind of a file by its name; plain text for an unknown suffix."""
    return kind_of(PurePosixPath(relative_path).name) or "text"


def parse_document(
    text: str, relative_path: str, kind: str | None = None, title: str | None = None
) -> ParsedDocument:
    """Title, tags and metadata of a document. `kind` defaults to the one its name implies;
    `title` is one the format itself carries (a PDF's info, an HTML page's heading), used when
    front matter sets none."""
    kind = kind or detect_kind(relative_path)
    front: dict[str, Any] = {}
    warning = None
    if kind == "markdown":
        front, warning = _front_matter(text)
    metadata = {
        key: _jsonable(value) for key, value in front.items() if key not in ("title", "tags")
    }
    found = _scalar_text(front.get("title")).strip() or (title or "").strip()
    if not found:
        found = _first_heading(text, kind) or PurePosixPath(relative_path).name
    return ParsedDocument(
        kind=kind,
        title=found.strip(),
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


def _has_aliases(body: str) -> bool:
    """YAML aliases let a few lines of front matter stand for an exponentially large document
    ("billion laughs"): loading shares the objects, but turning them into stored JSON expands
    them. Front matter has no use for them, so a document that has them is read without it."""
    return "*" in body and any(
        isinstance(token, yaml.AliasToken) for token in yaml.scan(body, Loader=yaml.SafeLoader)
    )


def _front_matter(text: str) -> tuple[dict[str, Any], str | None]:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, None
    try:
        if _has_aliases(match["body"]):
            return {}, "front matter ignored: YAML aliases (*name) are not supported"
        loaded = yaml.load(match["body"], Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        return {}, f"front matter ignored: {first_line}"
    if loaded is None:
        return {}, None
    if not isinstance(loaded, dict):
        return {}, "front matter ignored: not a mapping"
    return {str(key): value for key, value in loaded.items()}, None


def _first_heading(text: str, kind: str) -> str | None:
    """The first heading as the chunker sees it (ATX and setext Markdown headings outside code
    fences and front matter, reStructuredText section titles), so the title and the outline
    agree."""
    if kind not in ("markdown", "rst", "html"):
        return None
    headings = outline(text, kind)
    title = headings[0].title.strip() if headings else ""
    return title or None


def _scalar_text(value: Any) -> str:
    """A front-matter scalar as text (`title: 2024` is the title "2024"); '' for none or a
    list/mapping."""
    if value is None or isinstance(value, dict | list):
        return ""
    if isinstance(value, bool):
        return _tag_value(value)
    jsonable = _jsonable(value)
    return jsonable if isinstance(jsonable, str) else str(jsonable)


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
    """YAML can hold dates, NaN and other non-JSON values; metadata is stored as strict JSON."""
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # YAML's .nan / .inf have no JSON form
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
