"""Tool parameters: their JSON schemas, and our own validation of the values.

Every parameter is annotated `Any` at the Python level with an explicit JSON schema for clients:
the SDK then never rejects arguments itself (its own validation errors are plain text without an
error code), and every malformed argument becomes an `invalid_request` tool error that names the
argument. Every parameter defaults to None, so a tool can tell "not given" from "given"; the
documented default is shown in the schema instead.
"""

from __future__ import annotations

from collections.abc import Callable
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


def as_string(value: Any, argument: str, *, allow_blank: bool = False) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(argument, f"expected a string, got {type(value).__name__}")
    if not allow_blank and not value.strip():
        raise _invalid(argument, "must not be empty")
    return value


def as_int(value: Any, argument: str, *, minimum: int, maximum: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(argument, f"expected an integer, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise _invalid(argument, f"must be an integer {bounds}, got {value}", value=value)
    return value


def as_number(value: Any, argument: str, *, minimum: float, maximum: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(argument, f"expected a number, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise _invalid(argument, f"must be from {minimum} to {maximum}, got {value}", value=value)
    return float(value)


def as_bool(value: Any, argument: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _invalid(argument, f"expected true or false, got {type(value).__name__}")


def as_string_list(
    value: Any, argument: str, *, max_items: int, check: Callable[[str], str] | None = None
) -> list[str] | None:
    """A non-empty list of non-blank strings (stripped, de-duplicated in order)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise _invalid(argument, f"expected a list of strings, got {type(value).__name__}")
    if not value:
        raise _invalid(argument, "must not be empty (omit it instead)")
    if len(value) > max_items:
        raise _invalid(argument, f"accepts at most {max_items} items, got {len(value)}")
    cleaned = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise _invalid(argument, f"every item must be a non-empty string, got {item!r}")
        cleaned.append(check(item) if check else item.strip())
    return list(dict.fromkeys(cleaned))


def as_string_map(value: Any, argument: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(argument, f'expected an object such as {{"team": "infra"}}, got {value!r}')
    if not value:
        raise _invalid(argument, "must not be empty (omit it instead)")
    for key, item in value.items():
        if not key.strip() or not isinstance(item, str):
            raise _invalid(
                argument, f"every key must be non-empty and every value a string: {key!r}"
            )
    return {key.strip(): item for key, item in value.items()}


def as_scalar_map(value: Any, argument: str) -> dict[str, Any] | None:
    """An object whose values are JSON scalars (string, number, boolean, null)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise _invalid(
            argument, f'expected a non-empty object such as {{"lang": "en"}}, got {value!r}'
        )
    for key, item in value.items():
        if not key.strip() or isinstance(item, dict | list):
            raise _invalid(
                argument, f"every key must be non-empty and every value a scalar: {key!r}"
            )
    return dict(value)


def reject_given(arguments: dict[str, Any], names: list[str], reason: str) -> None:
    """Raise `invalid_request` naming the first of `names` that was given (not None)."""
    given = [name for name in names if arguments.get(name) is not None]
    if given:
        raise InvalidRequest(
            f"{', '.join(given)}: {reason}", details={"argument": given[0], "arguments": given}
        )
