"""The command line speaks in its own flags: the service names its arguments as the MCP tools
do (`document_paths`, `alpha`), and a person who typed `--path` or `--alpha` reads errors and
notes in those words. One table for every command: the same argument always has the same flag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kbmcp.errors import InvalidRequest, KbError, QueryRequired

# The service's argument -> what the user typed for it (a flag, or an argument's metavar).
FLAGS: dict[str, str] = {
    "query": "QUERY",
    "mode": "--mode",
    "alpha": "--alpha",
    "rrf_k": "--rrf-k",
    "min_similarity": "--min-similarity",
    "limit": "--limit",
    "recency_half_life_days": "--half-life",
    "knowledge_base_ids": "--kb",
    "document_ids": "--doc",
    "knowledge_ids": "--doc",
    "document_paths": "--path",
    "path_prefix": "--path",
    "tags": "--tag",
    "metadata": "--meta",
    "memory_store_ids": "--store",
    "include_documents": "--only",
    "include_memories": "--only",
    "document_id": "DOCUMENT_ID",
    "revision_id": "--revision",
    "offset": "--offset",
    "limit_chars": "--limit-chars",
}


def flag(argument: str) -> str:
    """The flag for a service argument (the argument itself if the CLI has none)."""
    return FLAGS.get(argument, argument)


def in_flags(text: str, arguments: Iterable[str]) -> str:
    """`text` with each of `arguments` (service names) written as its flag: whole words only,
    so `limit` in `limit_chars` or in `rate-limit` stays as it is."""
    names = sorted({name for name in arguments if name in FLAGS}, key=len, reverse=True)
    if not names:
        return text
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    return pattern.sub(lambda match: FLAGS[match.group(1)], text)


def named_arguments(error: KbError) -> list[str]:
    """The arguments an error names (`details.argument`, `details.arguments`) that the CLI has
    a flag for."""
    named = [error.details.get("argument"), *error.details.get("arguments", [])]
    return [name for name in named if isinstance(name, str) and name in FLAGS]


def error_line(error: KbError) -> tuple[str, int]:
    """The one line a command prints for `error`, in the CLI's words, and its exit status: 2
    for a bad value of an argument the user typed (an `InvalidRequest` or `QueryRequired` that
    names one; click's own usage errors, such as "Invalid value for '--limit-chars'", exit 2
    too), 1 for everything else (an unknown id, a conflict with the file's state, ...)."""
    arguments = named_arguments(error)
    message = in_flags(error.message, arguments)
    usage = bool(arguments) and isinstance(error, InvalidRequest | QueryRequired)
    return f"error: {message}", 2 if usage else 1
