"""Public identifiers: opaque, prefixed strings such as `doc_3f9a0c1b2d4e5f60`.

Ids are derived deterministically from what makes a row unique (a document from its knowledge
base and path, a revision from its document and number, ...), keyed with the file's id key: the
id is HMAC-SHA256(key, kind and parts), cut to 64 bits. The key is 32 random bytes made when the
file is created (kbmcp/store/id_key.py) and stored in it. So within one file the same inputs
always give the same id (re-adding a corpus keeps its ids, citations stay stable), while without
the key nobody can compute the id of another tenant's knowledge base from its name, or test
guesses of a memory's text against its id. Two files never share ids.

Internally every table joins on INTEGER rowids; the public id is a UNIQUE column looked up once
at the boundary. Token ids are random (kbmcp/tokens.py), not derived.

`KBMCP_TEST_ID_KEY` (64 hex digits) is a testing knob: a file created while it is set gets that
key instead of a random one, so test snapshots can pin real ids. It never replaces the key of an
existing file, and the file records that its key was pinned (`kbmcp doctor` warns about it).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kbmcp.errors import InvalidRequest, StoreError

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
KEY_BYTES = 32
TEST_KEY_ENV = "KBMCP_TEST_ID_KEY"
_TEST_KEY_PATTERN = re.compile(r"^[0-9a-fA-F]{64}$")


def make_id(key: bytes, kind: str, *parts: object) -> str:
    """A deterministic public id for a row of `kind`, from the values that make it unique,
    keyed with the file's id key."""
    message = "\x1f".join([kind, *map(str, parts)]).encode("utf-8")
    digest = hmac.new(key, message, hashlib.sha256).hexdigest()
    return f"{PREFIXES[kind]}_{digest[:_HEX_LEN]}"


@dataclass(frozen=True)
class IdKey:
    """A file's id key, read once per write (kbmcp/store/id_key.py: `id_key_of`)."""

    key: bytes = field(repr=False)

    def make(self, kind: str, *parts: object) -> str:
        return make_id(self.key, kind, *parts)


@dataclass(frozen=True)
class NewKey:
    key: bytes = field(repr=False)
    pinned: bool  # from KBMCP_TEST_ID_KEY, not random


def new_id_key() -> NewKey:
    """The key for a new file: 32 random bytes, or the test knob's when it is set."""
    pinned = os.environ.get(TEST_KEY_ENV, "").strip()
    if not pinned:
        return NewKey(secrets.token_bytes(KEY_BYTES), pinned=False)
    if not _TEST_KEY_PATTERN.match(pinned):
        raise StoreError(
            f"{TEST_KEY_ENV} must be {KEY_BYTES * 2} hex digits (it pins the id key of new files "
            "in tests; unset it everywhere else)",
            details={"argument": TEST_KEY_ENV},
        )
    return NewKey(bytes.fromhex(pinned), pinned=True)


def is_valid_id(kind: str, value: object) -> bool:
    if not isinstance(value, str):
        return False
    match = _ID_PATTERN.match(value)
    return bool(match) and match.group("prefix") == PREFIXES[kind]


def looks_like_id(value: str) -> bool:
    """Whether `value` has the shape of a public id of any kind (`kb_` and 16 hex digits, ...):
    such a name would be taken for an id where either is accepted (`--kb NAME_OR_ID`)."""
    match = _ID_PATTERN.match(value.strip())
    return bool(match) and match.group("prefix") in PREFIXES.values()


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
