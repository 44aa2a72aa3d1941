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

from typing import Any

from kbmcp.config import Settings

# Keys whose value maps names to schemas (a property named "title" is not a title).
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def without_titles(schema: Any) -> Any:
    """`schema` (a JSON schema) without the `title` keyword anywhere in it."""
    if isinstance(schema, list):
        return [without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    finished: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            finished[key] = {name: without_titles(child) for name, child in value.items()}
        elif key in ("default", "const", "enum", "examples"):
            finished[key] = value  # values, not schemas
        else:
            finished[key] = without_titles(value)
    return finished


def published_output_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool's output schema as tools/list shows it: no titles, defaults, `required` lists or
    discriminator, and each description once (its first occurrence, in document order)."""
    if schema is None:
        return None
    seen: set[str] = set()
    schema = _without_docstrings(schema)

    def once(node: Any) -> Any:
        if isinstance(node, list):
            return [once(item) for item in node]
        if not isinstance(node, dict):
            return node
        finished: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("default", "discriminator", "required"):
                continue
            if key == "description" and isinstance(value, str):
                if value in seen:
                    continue
                seen.add(value)
                finished[key] = value
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                finished[key] = {name: once(child) for name, child in value.items()}
            elif key in ("const", "enum", "examples"):
                finished[key] = value
            else:
                finished[key] = once(value)
        return finished

    return once(without_titles(schema))


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
