"""Argument checks shared by every service function: one rule, one error text.

The service layer is the single validator; the CLI and MCP adapters pass arguments through as
they came (JSON values or command-line strings already parsed by click). Every failure is an
`InvalidRequest` naming the argument in its message and in `details["argument"]`.
"""

from __future__ import annotations

import math
from typing import Any

from kbmcp.errors import InvalidRequest


def integer(value: Any, argument: str, low: int, high: int | None = None) -> int:
    """An integer from `low` (to `high`). JSON has one number type, so 2.0 is the integer 2;
    booleans are not numbers."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise InvalidRequest(
            f"{argument} must be an integer {bounds} (got {shown(value)})",
            details={"argument": argument},
        )
    return value


def number(value: Any, argument: str, low: float, high: float) -> float:
    """A finite number from `low` to `high`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise InvalidRequest(
            f"{argument} must be a number from {low:g} to {high:g} (got {shown(value)})",
            details={"argument": argument},
        )
    return float(value)


MAX_NAME = 200  # characters in a knowledge base's or memory store's name


def storable(text: str) -> bool:
    """Whether a database can hold `text` as given: PostgreSQL text refuses NUL, and neither
    backend stores an unpaired surrogate (JSON can carry one, UTF-8 cannot). Text that fails
    is refused alike on both backends, never half-accepted by one."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def collection_name(value: Any, what: str) -> str:
    """The name of a knowledge base or memory store (`what`): 1-MAX_NAME printable characters,
    outer whitespace stripped."""
    clean = value.strip() if isinstance(value, str) else ""
    if not clean or len(clean) > MAX_NAME or any(ch < " " for ch in clean) or not storable(clean):
        raise InvalidRequest(
            f"{what} name {shown(value)} is not valid: 1-{MAX_NAME} printable characters",
            details={"argument": "name", "value": value},
        )
    return clean


def shown(value: Any) -> str:
    """The offending value for an error message, cut short: a caller's megabyte of text is not
    echoed back."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
