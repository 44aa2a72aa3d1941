"""Tool parameters: their JSON schemas, and the checks that route arguments to a mode.

Every parameter is annotated `Any` at the Python level with an explicit JSON schema for clients:
the SDK then never rejects arguments itself (its own validation errors are plain text without an
error code). Values go to the service layer as they came; it is the single validator, and every
malformed argument becomes an `invalid_request` tool error that names the argument. Every
parameter defaults to None, so a tool can tell "not given" from "given"; the documented default
is shown in the schema instead.
"""

from __future__ import annotations

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
