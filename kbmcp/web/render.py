"""Templates: Jinja2 with autoescaping on, and the filters the pages use.

Every value a template prints is escaped (`autoescape=True`): a document whose text or title is
`<script>` or `<img onerror>` markup shows as that text. No template marks a value safe (a test
reads them all). Control characters (a terminal escape in a title, a NUL, a bidirectional
override that would reorder what a person reads) are shown as visible symbols, not passed on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined

from kbmcp.clock import parse_timestamp
from kbmcp.tags import tag_pairs

# C0 controls (but tab and line breaks in running text), DEL, C1 controls, and the Unicode
# format characters that reorder or hide text (bidirectional embeddings, overrides and
# isolates; zero-width joiners are left alone, emoji need them).
_LINE_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ALL_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _picture(match: re.Match[str]) -> str:
    """A control character as a visible symbol: U+2400's Control Pictures for C0 and DEL,
    `\\uXXXX` otherwise."""
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return f"\\u{code:04x}"


def visible(value: object) -> str:
    """A one-line value (title, path, tag, id) with every control character made visible."""
    return _ALL_CONTROLS.sub(_picture, str(value))


def visible_text(value: object) -> str:
    """Running text (a document, a memory): tabs and line breaks kept, other controls shown."""
    return _LINE_CONTROLS.sub(_picture, str(value))


def when(value: str | None) -> str:
    """An ISO 8601 UTC timestamp as `2026-01-03 14:05 UTC`."""
    if not value:
        return ""
    try:
        moment = parse_timestamp(value)
    except ValueError:
        return visible(value)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def url(path: str, params: Mapping[str, Any] | None = None, anchor: str | None = None) -> str:
    """`path?query#anchor` with the parameters URL-encoded; None and empty values are left out,
    a list gives the parameter once per item."""
    pairs: list[tuple[str, str]] = []
    for name, value in (params or {}).items():
        items: Iterable[Any] = value if isinstance(value, list | tuple) else [value]
        pairs.extend((name, str(item)) for item in items if item is not None and item != "")
    query = urlencode(pairs)
    return path + (f"?{query}" if query else "") + (f"#{anchor}" if anchor else "")


def number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}"


# htmx's settings, read from a <meta> tag (no inline script): no page text kept in
# localStorage for the back button (historyCacheSize 0: it asks the server again), no styles
# injected (the CSP allows none), no eval, no <script> run from a response, and error pages
# (404, 403, 401's sign-in page) are shown like any other page.
HTMX_CONFIG = json.dumps(
    {
        "historyCacheSize": 0,
        "includeIndicatorStyles": False,
        "allowEval": False,
        "allowScriptTags": False,
        "selfRequestsOnly": True,
        "responseHandling": [
            {"code": "204", "swap": False},
            {"code": "[2345]..", "swap": True},
        ],
    }
)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("kbmcp.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        {
            "visible": visible,
            "visible_text": visible_text,
            "when": when,
            "number": number,
            # Tags are an object everywhere (kbmcp/tags.py); a page shows one key=value each.
            "tag_pairs": tag_pairs,
        }
    )
    env.globals.update({"url": url, "htmx_config": HTMX_CONFIG})
    return env
