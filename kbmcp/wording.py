"""Counted nouns in people-facing lines: `1 document`, `2 documents`, `1 memory`, `3 memories`.

Used by the CLI's lines and the services' summary lines, so singular and plural agree wherever a
number is printed next to a noun.
"""

from __future__ import annotations


def plural(noun: str) -> str:
    """`document` -> `documents`, `memory` -> `memories`, `knowledge base` -> `knowledge bases`."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"


def counted(number: int, noun: str) -> str:
    """`1 file`, `2 files`, `0 memories`."""
    return f"{number} {noun if number == 1 else plural(noun)}"
