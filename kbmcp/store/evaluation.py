"""The evaluation concern of the store contract: what `kbmcp eval` reads besides searching
(kbmcp/service/evaluate.py): which file each document of the evaluated knowledge base came
from, so judgements that name files can be matched with results that name documents.

Implemented by kbmcp/store/sqlite/evaluation.py and kbmcp/store/postgres/evaluation.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kbmcp.store.connection import Connection


class Evaluation(Protocol):
    def document_sources(self, conn: Connection, knowledge_base_id: str) -> list[tuple[str, str]]:
        """(document public id, source file) of each published document of the knowledge base
        (its public id) that was added from a file."""
        ...
