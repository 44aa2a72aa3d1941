"""Tags in one shape everywhere a caller sees them: an object, the shape a tag filter takes.

A document can carry several values under one key (front matter `tags: [ops, runbook]` is
tag=ops and tag=runbook), so the stored form is a set of (key, value) pairs. What callers see,
in MCP results and `--json` alike, is an object: a key with one value maps to that string, a
key with several maps to the list of them, sorted ({"tag": ["ops", "runbook"], "team": "eng"}).
Tag filters take the same object (a list value: every one of its values must be carried), so
whatever a result shows can be passed back as a filter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from kbmcp.described import Described

# A key's value: one string, or the sorted list of its several values.
TagValue = str | list[str]
TagObject = dict[str, TagValue]


def tag_object(pairs: Iterable[tuple[str, str]]) -> TagObject:
    """The object of (key, value) pairs: keys in order, a list where a key has several values."""
    values: dict[str, set[str]] = {}
    for key, value in pairs:
        values.setdefault(key, set()).add(value)
    return {
        key: next(iter(found)) if len(found) == 1 else sorted(found)
        for key, found in sorted(values.items())
    }


def tag_pairs(tags: TagObject) -> list[tuple[str, str]]:
    """The (key, value) pairs of a tag object, in key order."""
    return [
        (key, value)
        for key, found in tags.items()
        for value in ([found] if isinstance(found, str) else found)
    ]


# A result field holding tags, with what an agent reads about it.
Tags = Annotated[
    TagObject, Described("key: value, or key: [values] for several; usable as a tags filter.")
]
