"""The id key every test file is created with (KBMCP_TEST_ID_KEY, set for the whole session in
tests/conftest.py), so ids in snapshots are stable and tests can compute expected ids."""

from __future__ import annotations

import hashlib

from kbmcp.ids import make_id

TEST_ID_KEY = hashlib.sha256(b"kbmcp test suite id key").digest()


def test_id(kind: str, *parts: object) -> str:
    """The id a file created by the test suite gives to a row of `kind` with these parts."""
    return make_id(TEST_ID_KEY, kind, *parts)


test_id.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test for pytest
