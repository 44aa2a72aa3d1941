"""Changing one member of a JSON file's text and nothing else: every other byte (the layout, a
compact one-line entry of another server, the order of keys) stays as the user wrote it.

The file has been parsed strictly first (kbmcp/connect/config_file.py), so the scan here only
needs positions: `json.JSONDecoder.raw_decode` reads each key and value and says where it ends.
A new member is written in the indentation of its neighbours (or one step deeper than its
object's own line); `set_member` and `remove_member` are checked by parsing their result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class _Member:
    key: str
    start: int  # where the key's opening quote is
    value_start: int
    end: int  # just after the value


@dataclass(frozen=True)
class _Object:
    start: int  # the "{"
    end: int  # just after the "}"
    members: list[_Member]


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    assert match is not None
    return match.end()


def _object(text: str, at: int) -> _Object:
    """The object whose "{" is at `at` (or after whitespace), with its members' positions."""
    at = _skip(text, at)
    if text[at] != "{":
        raise ValueError("not an object")
    start, at = at, _skip(text, at + 1)
    members: list[_Member] = []
    if text[at] == "}":
        return _Object(start, at + 1, members)
    while True:
        key, after_key = _DECODER.raw_decode(text, at)
        colon = _skip(text, after_key)
        value_start = _skip(text, colon + 1)
        _, end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, at, value_start, end))
        at = _skip(text, end)
        if text[at] == "}":
            return _Object(start, at + 1, members)
        at = _skip(text, at + 1)  # the comma


def _line_indent(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    assert match is not None
    return match.group(0)


def _render(value: Any, indent: int | str, prefix: str) -> str:
    """`value` as JSON whose continuation lines start with `prefix`."""
    dumped = json.dumps(value, indent=indent, ensure_ascii=False)
    return dumped.replace("\n", "\n" + prefix)


def _step(indent: int | str) -> str:
    return indent if isinstance(indent, str) else " " * indent


def _set(text: str, obj: _Object, key: str, value: Any, indent: int | str) -> str:
    existing = next((m for m in obj.members if m.key == key), None)
    if existing is not None:
        prefix = _line_indent(text, existing.start)
        rendered = _render(value, indent, prefix)
        return text[: existing.value_start] + rendered + text[existing.end :]
    if obj.members:
        last = obj.members[-1]
        prefix = _line_indent(text, last.start)
        one_line = "\n" not in text[obj.start : obj.end]
        if one_line:  # {"a": 1} stays on one line: , "key": value
            member = ", " + json.dumps(key) + ": " + json.dumps(value, ensure_ascii=False)
        else:
            member = ",\n" + prefix + json.dumps(key) + ": " + _render(value, indent, prefix)
        return text[: last.end] + member + text[last.end :]
    outer = _line_indent(text, obj.start)
    inner = outer + _step(indent)
    member = "\n" + inner + json.dumps(key) + ": " + _render(value, indent, inner) + "\n" + outer
    return text[: obj.start + 1] + member + text[obj.end - 1 :]


def set_member(text: str, path: tuple[str, ...], value: Any, indent: int | str) -> str:
    """`text` with the member at `path` (one or two keys deep) set to `value`; the objects on
    the way are made when missing."""
    top = _object(text, 0)
    if len(path) == 1:
        return _set(text, top, path[0], value, indent)
    outer_key, key = path
    holder = next((m for m in top.members if m.key == outer_key), None)
    if holder is None:
        return _set(text, top, outer_key, {key: value}, indent)
    return _set(text, _object(text, holder.value_start), key, value, indent)


def remove_member(text: str, path: tuple[str, ...]) -> str:
    """`text` without the member at `path` (a top-level key, or a key inside one)."""
    obj = _object(text, 0)
    if len(path) == 2:
        holder = next(m for m in obj.members if m.key == path[0])
        obj = _object(text, holder.value_start)
    index = next(i for i, m in enumerate(obj.members) if m.key == path[-1])
    member = obj.members[index]
    if len(obj.members) == 1:  # the object becomes empty: {} on its own
        return text[: obj.start] + "{}" + text[obj.end :]
    if index == 0:  # up to the next member
        return text[: member.start] + text[obj.members[1].start :]
    previous = obj.members[index - 1]  # from the previous member's end: its comma goes
    return text[: previous.end] + text[member.end :]
