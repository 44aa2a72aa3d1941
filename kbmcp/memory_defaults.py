"""Names and bounds of memories that the command line shows in its options (`remember --store`,
`memory list --limit`), kept apart so that `--help` loads no store or service module."""

from __future__ import annotations

DEFAULT_MEMORY_STORE = "memories"  # the store `remember` uses when none is named
DEFAULT_LIST = 50  # memories a listing returns unless asked
MAX_LIST = 1000
