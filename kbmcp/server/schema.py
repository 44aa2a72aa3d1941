"""What `tools/list` says about each tool, finished once the server knows its settings.

The SDK builds each tool's input and output schema from its signature and result model; two
things are done to them here, once, when the server is built:
- pydantic's automatic `title`s are dropped: each is the property's own name in Title Case
  ("Chunk Id" for chunk_id), a sixth of what tools/list weighed and nothing an agent can use;
- an output schema says each field's description once: read and outline results share their
  fields about the document, and the second copy of the same sentence is left out; and since
  a result always carries every field of its shape (tests check each against the full model:
  tests/test_tool_surface.py), `required` lists and defaults, which would say so field by field,
  are left out too, as is pydantic's OpenAPI `discriminator` (each shape's request_mode const
  already tells them apart), and so are the descriptions pydantic takes from the result
  classes' docstrings, which are written for readers of the code;
- text that depends on the server's settings is added where it belongs, so what an agent reads
  is this server's value (KBMCP_RRF_K=20: "Default 20"), not the shipped default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kbmcp.config import Settings

# Keys whose value maps names to schemas (a property named "title" is not a title).
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
# Keys whose value is a JSON value, not a schema.
_VALUES = ("default", "const", "enum", "examples")


def _pruned(schema: Any, keep: Callable[[str, Any], bool]) -> Any:
    """`schema` (a JSON schema) without the keywords `keep(key, value)` refuses, at every level,
    in document order. Names in `properties` and `$defs` are names, not keywords."""
    if isinstance(schema, list):
        return [_pruned(item, keep) for item in schema]
    if not isinstance(schema, dict):
        return schema
    finished: dict[str, Any] = {}
    for key, value in schema.items():
        if not keep(key, value):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            finished[key] = {name: _pruned(child, keep) for name, child in value.items()}
        elif key in _VALUES:
            finished[key] = value
        else:
            finished[key] = _pruned(value, keep)
    return finished


def _not_a_title(key: str, value: Any) -> bool:
    return not (key == "title" and isinstance(value, str))


def without_titles(schema: Any) -> Any:
    """`schema` (a JSON schema) without the `title` keyword anywhere in it."""
    return _pruned(schema, _not_a_title)


def published_output_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool's output schema as tools/list shows it: no titles, defaults, `required` lists or
    discriminator, and each description once (its first occurrence, in document order)."""
    if schema is None:
        return None
    seen: set[str] = set()

    def keep(key: str, value: Any) -> bool:
        if key in ("default", "discriminator", "required") or not _not_a_title(key, value):
            return False
        if key == "description" and isinstance(value, str):
            if value in seen:
                return False
            seen.add(value)
        return True

    return _pruned(_without_docstrings(schema), keep)


def _without_docstrings(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the descriptions pydantic takes from the result classes' docstrings
    (the root's and each `$defs` entry's): they are written for readers of the code; what an
    agent needs is on the fields."""
    finished = {key: value for key, value in schema.items() if key != "description"}
    if isinstance(schema.get("$defs"), dict):
        finished["$defs"] = {
            name: {key: value for key, value in child.items() if key != "description"}
            for name, child in schema["$defs"].items()
        }
    return finished


def settings_sentences(settings: Settings) -> dict[tuple[str, str], str]:
    """(tool, parameter) -> the sentence about this server's setting, appended to the
    parameter's description."""
    half_life = settings.recency_half_life_days
    return {
        ("search_knowledge", "rrf_k"): f"Default {settings.rrf_k}.",
        ("search_knowledge", "recency_half_life_days"): f"Default {half_life:g}.",
    }


def with_settings(tool: str, input_schema: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`input_schema` of `tool` with the settings' sentences added to its parameters."""
    properties = dict(input_schema.get("properties", {}))
    for (owner, name), sentence in settings_sentences(settings).items():
        if owner == tool and name in properties:
            described = dict(properties[name])
            described["description"] = f"{described.get('description', '')} {sentence}".strip()
            properties[name] = described
    return {**input_schema, "properties": properties}
