"""The contract of the `search` concern: what the search engine asks of a backend.

The engine (kbmcp/search/engine.py) validates a request, resolves its scope by the rules of
kbmcp/search/scope.py and builds results and statistics; a backend answers the questions that
need its data, inside the request's read snapshot (`Store.read_snapshot`), so the readable set,
the scope and the ranking agree:

- scope: public ids -> row ids (with what the caller may see of them), the number of stores,
  the scope's chunks, the filters that alone select nothing;
- the similarity floor's exempt chunks (kbmcp/search/floor.py);
- `rank`: both channels, fusion, decay and the limit, in the backend's ranking statement (same
  shape on both: scope -> keyword candidates -> vector candidates -> fusion -> decay -> ORDER BY
  ... LIMIT), and how each channel found its candidates (its strategy, per backend: docs/search.md);
- the index's tokenizer, for excerpts around the query's terms.

SQLite: kbmcp/store/sqlite/search/ (FTS5, sqlite-vec, and the in-memory accelerators of a
long-lived process). PostgreSQL: kbmcp/store/postgres/search.py (its keyword postings,
pgvector; no accelerators: every process reads the database, so several servers stay
consistent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from kbmcp.search.ranking import Ranking
    from kbmcp.search.request import SearchArguments
    from kbmcp.search.resolved import Scope, SimilarityFloor
    from kbmcp.store.connection import Connection

# The index's tokenizer over UTF-8 text: (byte start, byte end, token) per token.
Tokenizer = Callable[[bytes], list[tuple[int, int, str]]]


@dataclass(frozen=True)
class ScopeStatements:
    """A backend's statements of a scope's documents and how they are put together: `base_documents`
    and `base_memories` select one kind's readable rows ({published}: `published` unless archived
    rows are wanted), each filter a kind applies to adds its clause, and the kinds are joined by
    UNION ALL; `nothing` selects no row. `chunks_of_documents` selects the indexed chunks of the
    documents statement it is formatted with ({documents})."""

    base_documents: str
    base_memories: str
    filter_clauses: Mapping[str, str]
    memory_filter_clauses: Mapping[str, str]
    published: str
    nothing: str
    chunks_of_documents: str

    def documents_sql(
        self, scope: Scope, only: str | None = None, *, include_archived: bool = False
    ) -> str:
        """The scope's documents and memories (id, current_revision_id), parameters from the
        backend's `scope_params`; `only`: with one filter alone, over the kinds it applies to."""
        names = [only] if only is not None else list(scope.filters)
        published = "" if include_archived else self.published
        parts = []
        for base, stores, clauses in (
            (self.base_documents, scope.readable_kb_ids, self.filter_clauses),
            (self.base_memories, scope.memory_store_ids, self.memory_filter_clauses),
        ):
            # A kind that is off, or has no readable store, adds nothing (and costs nothing).
            if not stores or (only is not None and only not in clauses):
                continue
            applied = "".join(f"  AND {clauses[n]}\n" for n in names if n in clauses)
            parts.append(base.format(published=published) + applied)
        return "UNION ALL".join(parts) or self.nothing

    def empty_filters(self, conn: Connection, scope: Scope, params: dict[str, Any]) -> list[str]:
        """The filters (by name) that alone select no indexed chunk; `params`: the backend's
        `scope_params`."""
        return [
            name
            for name in scope.filters
            if conn.execute(
                "SELECT NOT EXISTS ("
                + self.chunks_of_documents.format(documents=self.documents_sql(scope, only=name))
                + ")",
                params,
            ).fetchone()[0]
        ]


class ScopeSql(Protocol):
    """A backend's scope SQL (kbmcp/store/sqlite/search/scope.py, kbmcp/store/postgres/scope.py):
    the statement of a scope's documents, which listing and scan select from too, so search,
    listing and scan validate and apply every filter the same way."""

    def documents_sql(
        self, scope: Scope, only: str | None = None, *, include_archived: bool = False
    ) -> str:
        """The scope's documents and memories (id, current_revision_id)."""
        ...

    def scope_params(self, scope: Scope) -> dict[str, Any]:
        """The parameters of `documents_sql`."""
        ...


@dataclass(frozen=True)
class ResolvedId:
    """One requested public id and what the principal may see of it. `row_id` None: unknown
    or not readable (indistinguishable on purpose); `usable` False: a document that is not
    published."""

    argument: str  # knowledge_base_ids | document_ids | memory_store_ids
    public_id: str
    row_id: int | None
    knowledge_base_id: int | None  # the store the row is in (itself for a store)
    usable: bool


@dataclass(frozen=True)
class ReadableStores:
    """Whose chunks the keyword statistics cover: the stores a principal may read."""

    store_ids: tuple[int, ...]  # knowledge bases and memory stores, ascending
    every_store: bool  # they are every store of the database: the index's own statistics apply


@dataclass(frozen=True)
class RankQuery:
    """One validated search as a backend ranks it."""

    args: SearchArguments
    terms: list[str]  # the query's terms (kbmcp/search/query_text.py)
    query_vector: np.ndarray | None  # the query's embedding; None: no vector channel
    scope: Scope
    readable: ReadableStores
    floor: SimilarityFloor
    half_life_days: float  # recency decay of memories; 0: none
    now: str  # ISO 8601: the time ages are taken at


@dataclass(frozen=True)
class Ranked:
    ranking: Ranking
    lexical_strategy: str | None  # how each channel found its candidates; None: not run
    vector_strategy: str | None
    scope_rows: int | None  # indexed chunks in the scope; None when the scope is not a list


class Search(Protocol):
    def resolve_ids(
        self,
        conn: Connection,
        knowledge_base_ids: list[str],
        document_ids: list[str],
        readable_kb_ids: list[int],
    ) -> list[ResolvedId]:
        """One row per requested id, knowledge bases first, each kind in request order;
        readable only inside `readable_kb_ids`."""
        ...

    def resolve_memory_store_ids(
        self, conn: Connection, memory_store_ids: list[str], readable_store_ids: list[int]
    ) -> list[ResolvedId]:
        """One row per requested memory store id, in request order."""
        ...

    def count_stores(self, conn: Connection) -> int:
        """Knowledge bases and memory stores in the database (every tenant's)."""
        ...

    def scope_chunk_ids(self, conn: Connection, scope: Scope) -> np.ndarray | None:
        """The scope's indexed chunk ids (sorted int64), None when it is every indexed chunk."""
        ...

    def empty_filters(self, conn: Connection, scope: Scope) -> list[str]:
        """The scope's filters (by name) that alone select no indexed chunk."""
        ...

    def selected_document_chunks(self, conn: Connection, document_ids: list[int]) -> np.ndarray:
        """The indexed chunk ids (sorted int64) of these documents (row ids)."""
        ...

    def chunks_at_paths(
        self, conn: Connection, knowledge_base_ids: list[int], paths: list[str]
    ) -> np.ndarray:
        """The indexed chunk ids (sorted int64) of the documents of these knowledge bases (row
        ids) whose path is exactly one of `paths`."""
        ...

    def prepare_keywords(self, conn: Connection) -> None:
        """Before a keyword search's read snapshot: whatever the connection needs once (SQLite:
        the vocabulary table of FTS5; nothing on PostgreSQL)."""
        ...

    def rank(self, conn: Connection, query: RankQuery, accelerator: Any | None) -> Ranked:
        """Both channels, fusion, decay and the limit. `accelerator`: the process's in-memory
        copies (`new_accelerator`), or None."""
        ...

    def term_tokens(self, conn: Connection, term: str) -> list[str]:
        """The index tokens of a query term (stemmed, case- and diacritic-folded)."""
        ...

    def document_tokenizer(self, conn: Connection) -> Tokenizer:
        """The index's tokenizer for a document's text."""
        ...

    def new_accelerator(self) -> Any | None:
        """The in-memory copies a long-lived process keeps (SQLite), or None (PostgreSQL)."""
        ...
