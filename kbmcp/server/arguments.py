"""Tool parameters: their JSON schemas, and the checks that route arguments to a mode.

Every parameter is annotated `Any` at the Python level with an explicit JSON schema for clients:
the SDK then never rejects arguments itself (its own validation errors are plain text without an
error code). Values go to the service layer as they came; it is the single validator, and every
malformed argument becomes an `invalid_request` tool error that names the argument. Every
optional parameter defaults to None, so a tool can tell "not given" from "given"; the documented
default is shown in the schema instead. A parameter without a default is `required` in the
schema; the server's ToolCallGuard reports it missing before the SDK would (in plain text).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from kbmcp.errors import InvalidRequest

_UNSET = object()


def param(schema: dict[str, Any], description: str, *, default: Any = _UNSET) -> Any:
    """An `Annotated[Any, ...]` parameter type with a hand-written JSON schema."""

    def extra(field_schema: dict[str, Any]) -> None:
        field_schema.pop("default", None)
        if default is not _UNSET:
            field_schema["default"] = default

    return Annotated[
        Any, WithJsonSchema(schema), Field(description=description, json_schema_extra=extra)
    ]


def string_list_schema(max_items: int, *, pattern: str | None = None) -> dict[str, Any]:
    items: dict[str, Any] = {"type": "string", "minLength": 1}
    if pattern:
        items["pattern"] = pattern
    return {"type": "array", "items": items, "minItems": 1, "maxItems": max_items}


STRING_MAP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "minProperties": 1,
}


def _invalid(argument: str, message: str, **details: Any) -> InvalidRequest:
    return InvalidRequest(f"{argument}: {message}", details={"argument": argument, **details})


def as_bool(value: Any, argument: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _invalid(argument, f"expected true or false, got {type(value).__name__}")


def reject_given(arguments: dict[str, Any], names: list[str], reason: str) -> None:
    """Raise `invalid_request` naming the first of `names` that was given (not None)."""
    given = [name for name in names if arguments.get(name) is not None]
    if given:
        raise InvalidRequest(
            f"{', '.join(given)}: {reason}", details={"argument": given[0], "arguments": given}
        )


# Names other knowledge tools (and agents' habits) use for kbmcp's arguments. An unknown argument
# found here is answered with the first of its names that the tool has.
KNOWN_ELSEWHERE: dict[str, tuple[str, ...]] = {
    "max_results": ("limit",),
    "top_k": ("limit",),
    "num_results": ("limit",),
    "page_size": ("limit",),
    "q": ("query",),
    "search": ("query",),
    "text": ("query", "content"),
    "fact": ("content",),
    "memory": ("content",),
    "knowledge_base_id": ("knowledge_base_ids",),
    "kb_id": ("knowledge_base_ids",),
    "kb_ids": ("knowledge_base_ids",),
    "knowledge_item_id": ("document_id",),
    "knowledge_item_ids": ("document_ids",),
    "doc_id": ("document_id",),
    "doc_ids": ("document_ids",),
    "knowledge_revision_id": ("revision_id",),
    "vector_ids": ("chunk_ids",),
    "memory_store_id": ("memory_store_ids",),
    "path": ("path_prefix", "document_paths"),
}
# How close a misspelling must be to a known name to be suggested (difflib's ratio).
TYPO_CUTOFF = 0.75


def suggestion(name: str, known: set[str]) -> str | None:
    """The argument `name` probably means among `known` (the tool's own), or None."""
    for candidate in (*KNOWN_ELSEWHERE.get(name, ()), f"{name}s", name.removesuffix("s")):
        if candidate in known and candidate != name:
            return candidate
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=TYPO_CUTOFF)
    return close[0] if close else None
