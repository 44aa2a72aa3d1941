"""The search request and response: the contract between the search engine, the CLI and MCP.

Plain dataclasses. The result types are also the MCP output schemas (kbmcp/server/models.py
builds them from these fields): a `Described` text is what an agent reads about a field.
`Citation` is shared by every reader that points into a revision (search results, fetched chunks).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from kbmcp.described import Described
from kbmcp.search.limits import (  # noqa: F401 (re-exported: the request's contract)
    DEFAULT_ALPHA,
    DEFAULT_LIMIT,
    DEFAULT_LIMIT_CHARS,
    DEFAULT_MODE,
    FUSION_PARAMETERS,
    MAX_DOCUMENT_IDS,
    MAX_FILTER_PAIRS,
    MAX_HALF_LIFE,
    MAX_INLINED_DOCUMENTS,
    MAX_KNOWLEDGE_BASE_IDS,
    MAX_LIMIT,
    MAX_LIMIT_CHARS,
    MAX_MEMORY_STORE_IDS,
    MAX_PATH_PREFIXES,
    MAX_QUERY_CHARS,
    MODE_ALIASES,
    MODES,
)


@dataclass(frozen=True)
class Citation:
    """Where a passage comes from: cite it as path + line range of this exact revision."""

    path: str
    revision_id: str
    line_start: Annotated[int, Described("1-based first line.")]
    line_end: Annotated[int, Described("1-based last line (inclusive).")]
    char_start: Annotated[int, Described("0-based first character in the revision.")]
    char_end: Annotated[int, Described("0-based end (exclusive).")]
    page: Annotated[int | None, Described("1-based PDF page; null for other formats.")] = None
    sha256: Annotated[
        str,
        Described("SHA-256 of the revision's whole text."),
    ] = ""


Reference = Annotated[
    str,
    Described(
        "Paste-ready citation: knowledge base:path#Lstart-Lend@revision (a memory: its store "
        "and id)."
    ),
]


def reference(
    knowledge_base_name: str, path: str, line_start: int, line_end: int, revision_id: str
) -> str:
    """`handbook:ops/restore.md#L12-L30@rev_...`: where a passage or a read window is, in one
    string an agent can paste into its answer (a single line is `#L12`). For a memory the
    knowledge base is its store and the path its id."""
    lines = f"L{line_start}" if line_start == line_end else f"L{line_start}-L{line_end}"
    return f"{knowledge_base_name}:{path}#{lines}@{revision_id}"


class ChunkPlace(Protocol):
    """Where a chunk lies in its revision, as a ranked row and a fetched chunk both hold it."""

    @property
    def path(self) -> str: ...
    @property
    def revision_id(self) -> str: ...
    @property
    def line_start(self) -> int: ...
    @property
    def line_end(self) -> int: ...
    @property
    def char_start(self) -> int: ...
    @property
    def char_end(self) -> int: ...


def chunk_citation(
    chunk: ChunkPlace, document_format: str, heading_path: Sequence[str], sha256: str
) -> Citation:
    """The citation of a chunk of a revision (its text's SHA-256: `sha256`) of a document of
    `document_format` (a PDF's chunk names its page)."""
    return Citation(
        chunk.path,
        chunk.revision_id,
        chunk.line_start,
        chunk.line_end,
        chunk.char_start,
        chunk.char_end,
        page_of(document_format, heading_path),
        sha256,
    )


# A PDF's sections are its pages: ingest stores each page after a line `\f[page N]` (or
# `\f[page N (label)]` when the page prints another label), so the first heading of a PDF
# chunk is "page N" or "page N (label)".
_PAGE_HEADING = re.compile(r"page (\d+)(?: \([^()]*\))?")


def page_of(kind: str, heading_path: Sequence[str]) -> int | None:
    """The page a chunk of a document of `kind` lies on (PDF only)."""
    if kind != "pdf" or not heading_path:
        return None
    match = _PAGE_HEADING.fullmatch(heading_path[0])
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class SearchFilters:
    """Scope: every filter applies before ranking and the limit. None means "not filtered"."""

    knowledge_base_ids: list[str] | None = None
    document_ids: list[str] | None = None
    # An alias of document_ids (the name some agents know): errors name it when it was used.
    knowledge_ids: list[str] | None = None
    document_paths: list[str] | None = None  # path prefixes
    tags: dict[str, str] | None = None  # every pair must match
    metadata: dict[str, Any] | None = None  # equality on document metadata keys
    memory_store_ids: list[str] | None = None
    # Which kinds to search; None: each kind the principal can read. Both False is an error.
    include_documents: bool | None = None
    include_memories: bool | None = None


@dataclass(frozen=True)
class SearchRequest:
    query: str
    # None: chosen by the fusion parameter given (rrf_k: rrf, alpha: hybrid), else DEFAULT_MODE.
    mode: str | None = None
    alpha: float | None = None  # lexical weight, hybrid only; None: DEFAULT_ALPHA
    rrf_k: int | None = None  # rrf only; None: the configured default (KBMCP_RRF_K, 60)
    min_similarity: float | None = None  # cosine floor for vector candidates, before fusion
    limit: int = DEFAULT_LIMIT
    filters: SearchFilters = field(default_factory=SearchFilters)
    # Candidate depth per channel (None: engine default). Tests force 1 to prove scope-first.
    candidates: int | None = None
    # Memories' scores are halved every this many days of age (updated_at) after fusion; 0
    # disables; None: the configured default (KBMCP_RECENCY_HALF_LIFE_DAYS, 0).
    recency_half_life_days: float | None = None
    # Inline the text of the first MAX_INLINED_DOCUMENTS distinct documents among the results:
    # a window of content_limit_chars (None: DEFAULT_LIMIT_CHARS) from offset 0; memories whole.
    include_content: bool | None = None
    content_limit_chars: int | None = None


@dataclass(frozen=True)
class InlineContent:
    """The text include_content inlines into a result: a read window from offset 0 of the
    result's revision (a memory: all of it)."""

    content: str  # the revision's text from its start
    content_offset: int
    content_limit: int
    content_total_chars: int
    content_truncated: Annotated[bool, Described("Text continues after this window.")]
    next_offset: Annotated[
        int | None,
        Described("Read on from here (with revision_id); null at the end."),
    ]


@dataclass(frozen=True)
class SearchResult:
    kind: Annotated[
        Literal["document", "memory"],
        Described("A passage of a document, or of a memory."),
    ]
    chunk_id: str
    document_id: Annotated[str, Described("doc_..., or a memory's mem_...")]
    revision_id: str
    knowledge_base_id: Annotated[
        str,
        Described("kb_..., or a memory's store mst_..."),
    ]
    title: str
    path: str
    heading_path: Annotated[
        list[str], Described("Headings enclosing the passage, outermost first.")
    ]
    excerpt: Annotated[str, Described("Bounded; chunk_ids fetches the whole chunk.")]
    reference: Reference
    citation: Citation
    lexical_rank: Annotated[int | None, Described("Keyword-channel rank.")]
    # bm25 with the sign flipped from FTS5's
    lexical_score: Annotated[float | None, Described("BM25, higher is better.")]
    semantic_rank: Annotated[int | None, Described("Semantic-channel rank.")]
    semantic_similarity: Annotated[float | None, Described("Cosine.")]
    score: Annotated[
        float,
        Described("Fused score (times recency_weight); the order."),
    ]
    recency_weight: Annotated[
        float | None,
        Described("A memory's decay factor 2^(-age_days / half-life); else null."),
    ] = None
    content: Annotated[
        InlineContent | None,
        Described("include_content: the document's text, on its first result."),
    ] = None


@dataclass(frozen=True)
class SearchStats:
    lexical_candidates: Annotated[int, Described("Found in scope.")]
    semantic_candidates: Annotated[int, Described("Kept in scope.")]
    scope_chunks: Annotated[int | None, Described("Null when unscoped.")]
    results: int
    has_more: Annotated[bool, Described("More beyond the limit.")]
    limit: Annotated[int, Described("As applied.")]
    limit_clamped: Annotated[bool, Described("Above 100, clamped.")]
    filters_unmatched: Annotated[list[str], Described("Filters that selected nothing.")]
    lexical_strategy: Annotated[
        str | None,
        Described("fts5, postings or scan; null: not run."),
    ]
    vector_strategy: Annotated[
        str | None,
        Described("sql_exact, vec0_scan or matrix_exact; null: not run."),
    ]
    elapsed_ms: float


@dataclass(frozen=True)
class SearchResponse:
    query: str
    mode: Annotated[str, Described("The ranking used.")]
    alpha: float | None
    rrf_k: int | None
    results: list[SearchResult]
    stats: SearchStats
