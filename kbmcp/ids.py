"""Public identifiers: opaque, prefixed strings such as `doc_3f9a0c1b2d4e5f60`.

Ids are derived deterministically from what makes a row unique (a document from its knowledge
base and path, a revision from its document and number, ...). The same corpus ingested into a
fresh file therefore gets the same ids, which keeps citations stable across rebuilds and lets
snapshot tests pin real outputs without scrubbing. Internally every table joins on INTEGER
rowids; the public id is a UNIQUE column looked up once at the boundary.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from kbmcp.errors import InvalidRequest

PREFIXES = {
    "tenant": "ten",
    "knowledge_base": "kb",
    "document": "doc",
    "revision": "rev",
    "chunk": "chk",
    "memory": "mem",
    "memory_store": "mst",
    "token": "tok",
}

_HEX_LEN = 16
_ID_PATTERN = re.compile(r"^(?P<prefix>[a-z]+)_(?P<body>[0-9a-f]{16})$")


def make_id(kind: str, *parts: object) -> str:
    """A deterministic public id for a row of `kind`, from the values that make it unique."""
    digest = hashlib.sha256("\x1f".join([kind, *map(str, parts)]).encode("utf-8")).hexdigest()
    return f"{PREFIXES[kind]}_{digest[:_HEX_LEN]}"


def is_valid_id(kind: str, value: object) -> bool:
    if not isinstance(value, str):
        return False
    match = _ID_PATTERN.match(value)
    return bool(match) and match.group("prefix") == PREFIXES[kind]


def check_id(kind: str, value: object, *, argument: str) -> str:
    """Return `value` stripped if it is a well-formed id of `kind`, else raise `InvalidRequest`."""
    candidate = value.strip() if isinstance(value, str) else value
    if not is_valid_id(kind, candidate):
        prefix = PREFIXES[kind]
        raise InvalidRequest(
            f"{argument}: {value!r} is not a valid {kind.replace('_', ' ')} id "
            f"(expected '{prefix}_' followed by {_HEX_LEN} hex digits)",
            details={"argument": argument, "value": value},
        )
    assert isinstance(candidate, str)
    return candidate


def check_list(values: object, *, argument: str, limit: int) -> list[Any]:
    """A non-empty list (not a string) of at most `limit` items, else `InvalidRequest`."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InvalidRequest(f"{argument} must be a list", details={"argument": argument})
    if not values:
        raise InvalidRequest(f"{argument} must not be empty", details={"argument": argument})
    if len(values) > limit:
        raise InvalidRequest(
            f"{argument} accepts at most {limit} items, got {len(values)}",
            details={"argument": argument, "limit": limit},
        )
    return list(values)


def check_id_list(kind: str, values: Sequence[str], *, argument: str, limit: int) -> list[str]:
    """Validate a list of ids: not empty, at most `limit`, each well-formed; stripped and
    de-duplicated in order."""
    cleaned = [
        check_id(kind, value, argument=argument)
        for value in check_list(values, argument=argument, limit=limit)
    ]
    return list(dict.fromkeys(cleaned))
