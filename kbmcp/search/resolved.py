"""What a search request resolves to before the store runs it: plain values, no store.

The search layer resolves a request's filters against the caller's readable set
(kbmcp/search/scope.py) and its similarity floor (kbmcp/search/floor.py); both need the store
to do so. The store's search, listing and scan contracts, and both backends' SQL, take the
results: a `Scope`, a `SimilarityFloor`, and the metadata filter's probe rows. They live here,
in a leaf module that imports nothing of kbmcp's, so that the store never imports the code
that calls it (tests/test_import_graph.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Not at run time: `kbmcp ls` and `--help` load no heavy module (tests/test_cli_startup.py),
    # and they resolve a scope; a floor's `keeps` imports numpy when a search runs.
    import numpy as np


@dataclass(frozen=True)
class Scope:
    """A resolved scope: which stores are searched and the active filters' values (each
    backend renders them as SQL). `readable_kb_ids` / `memory_store_ids`: the knowledge bases /
    memory stores searched, None when that kind is not (excluded by the request or not
    readable)."""

    readable_kb_ids: list[int] | None
    memory_store_ids: list[int] | None = None
    # Active filter -> its value: row ids (knowledge_base_ids, document_ids, memory_store_ids),
    # path prefixes, [key, value] tag pairs, {key: scalar} metadata.
    filters: dict[str, Any] = field(default_factory=dict)
    # True when the scope is every indexed chunk (no filters, every knowledge base and memory
    # store readable and included): the channels then skip the allow-list entirely.
    everything: bool = False
    # A filter's name as the caller sent it, where it differs (knowledge_ids for document_ids).
    sent_as: dict[str, str] = field(default_factory=dict)

    @property
    def filtered(self) -> bool:
        return bool(self.filters)


@dataclass(frozen=True)
class SimilarityFloor:
    """`value` None: no floor. `exempt`: chunk ids (sorted int64) the floor does not apply to;
    None when it applies to every row."""

    value: float | None = None
    exempt: np.ndarray | None = None

    def keeps(self, ids: np.ndarray, scores: np.ndarray, slack: float = 0.0) -> np.ndarray:
        """A mask over candidate rows: True for the rows the floor keeps (`slack` below the
        floor still counts as above it)."""
        import numpy as np

        if self.value is None:
            return np.ones(len(ids), dtype=bool)
        keep = scores >= self.value - slack
        if self.exempt is not None:
            keep |= np.isin(ids, self.exempt)
        return keep

    def exempt_json(self) -> str:
        """The exempt ids as a JSON array, the SQL strategies' parameter."""
        return json.dumps([] if self.exempt is None else self.exempt.tolist())


def metadata_probes(metadata: Mapping[str, Any]) -> list[list[Any]]:
    """[key, indexed value to look up, want_type, want_value] rows for the metadata clause.

    A string may equal a text value, or a number or boolean written the same way, so it is looked
    up as text, as a number when it reads as one, and as 1/0 when it is "true"/"false"; the typed
    rule in the SQL then keeps only real matches (e.g. "2.0" finds 2 by number, and the rule
    rejects it because 2 is written "2")."""
    probes: list[list[Any]] = []
    for key, want in metadata.items():
        if want is None:
            probes.append([key, None, "null", None])
        elif isinstance(want, bool):
            probes.append([key, int(want), "true" if want else "false", None])
        elif isinstance(want, int | float):
            probes.append([key, want, "number", None])
        else:
            probes.append([key, want, "text", want])
            number = _as_number(want)
            if number is not None:
                probes.append([key, number, "text", want])
            if want in ("true", "false"):
                probes.append([key, int(want == "true"), "text", want])
    return probes


def _as_number(text: str) -> int | float | None:
    for parse in (int, float):
        try:
            value = parse(text)
        except ValueError:
            continue
        return value if math.isfinite(value) else None
    return None
