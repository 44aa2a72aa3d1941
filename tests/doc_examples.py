"""Checking docs/'s JSON examples against the tools' real schemas, so that an example cannot lag
behind what the tools return (tests/test_docs_examples.py).

An example is a ```json block of docs/tools.md: a tool's arguments, a tool's result, or an error
body. A result example shows every field of each object, as the tool returns them all; an
object that shows only some says so with the key "…" (`{"kind": "document", "…": "…"}`). An
arguments example may leave any argument out. Values are illustrative and not checked, their
keys are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

ELIDED = "…"
UNKNOWN = "not in the schema"
# The body of every tool error (kbmcp/errors.py `KbError.to_dict`); details vary by error.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object", "additionalProperties": True},
            },
        }
    },
}


def json_blocks(markdown: str) -> list[tuple[int, Any]]:
    """Every JSON value of the ```json blocks of `markdown`, parsed, with the line it starts
    on: a block holds one value, or one value per line (several calls side by side)."""
    blocks = []
    for match in re.finditer(r"^```json\n(.*?)^```", markdown, re.M | re.S):
        line = markdown.count("\n", 0, match.start()) + 1
        try:
            blocks.append((line, json.loads(match.group(1))))
        except json.JSONDecodeError:
            for offset, text in enumerate(match.group(1).splitlines(), start=1):
                if text.strip():
                    blocks.append((line + offset, json.loads(text)))
    return blocks


@dataclass(frozen=True)
class Root:
    """A schema an example may be an instance of. `complete`: a result, whose objects show every
    field unless elided; else arguments, which may leave any out."""

    name: str
    schema: dict[str, Any]
    complete: bool


def problems(example: Any, roots: list[Root]) -> list[str]:
    """Why `example` is an instance of none of `roots` (those of the root it comes closest to);
    empty when it is one of them."""
    attempts = []
    for root in roots:
        found = _check(example, root.schema, root.schema.get("$defs", {}), root.complete, "")
        if not found:
            return []
        attempts.append((_distance(found), [f"as {root.name}: {p}" for p in found]))
    return min(attempts)[1] if attempts else ["no schema"]


def _distance(found: list[str]) -> tuple[int, int]:
    """How far an example is from a schema: keys the schema does not have, then problems."""
    return sum(UNKNOWN in problem for problem in found), len(found)


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _check(value: Any, schema: dict[str, Any], defs: dict[str, Any], complete: bool,
           where: str) -> list[str]:  # fmt: skip
    schema = _resolve(schema, defs)
    choices = schema.get("anyOf") or schema.get("oneOf")
    if choices:
        found = [_check(value, choice, defs, complete, where) for choice in choices]
        return min(found, key=_distance)
    if isinstance(value, list):
        if schema.get("type") not in (None, "array"):
            return [f"{where or '.'}: a list where the schema has {schema.get('type')}"]
        items = schema.get("items", {})
        return [p for i, item in enumerate(value) for p in _check(item, items, defs, complete,
                                                                    f"{where}[{i}]")]  # fmt: skip
    if not isinstance(value, dict):
        if schema.get("type") in ("object", "array"):
            return [f"{where or '.'}: a {type(value).__name__} where the schema has an object"]
        return []
    if schema.get("type") not in (None, "object"):
        return [f"{where or '.'}: an object where the schema has {schema.get('type')}"]
    properties: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if not properties and extra not in (None, False):  # a map (tags, metadata, details)
        if isinstance(extra, dict):
            return [p for key, item in value.items()
                    for p in _check(item, extra, defs, complete, f"{where}.{key}")]  # fmt: skip
        return []
    found = []
    shown = set(value) - {ELIDED}
    # One problem per key: the root an example comes closest to is the one with fewest.
    at = where or "."
    found.extend(f"{at}: {key} {UNKNOWN}" for key in sorted(shown - set(properties)))
    if complete and ELIDED not in value:
        found.extend(
            f'{at}: lacks {key} (or mark the object elided: "…": "…")'
            for key in sorted(set(properties) - shown)
        )
    for key in sorted(shown & set(properties)):
        found.extend(_check(value[key], properties[key], defs, complete, f"{where}.{key}"))
    return found
