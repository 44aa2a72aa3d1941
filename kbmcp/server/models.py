"""Pydantic output models of the MCP tools: the declared `outputSchema`s.

They mirror the service dataclasses field for field (tests/test_mcp_models.py fails when the two
drift apart) and add descriptions where a field's meaning is not obvious to an agent.
`search_knowledge` returns one of five shapes, told apart by `request_mode`; its output schema is
a `oneOf` of them under an object root (MCP requires `"type": "object"` at the root).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel


class _Out(BaseModel):
    """Base of the output models (tests/test_mcp_models.py checks the mirror is complete)."""


class Citation(_Out):
    """Where a passage comes from: cite it as path + line range of this exact revision."""

    path: str
    revision_id: str
    line_start: int = Field(description="1-based first line.")
    line_end: int = Field(description="1-based last line (inclusive).")
    char_start: int = Field(description="0-based offset of the first character in the revision.")
    char_end: int = Field(description="0-based offset after the last character (exclusive).")


# ------------------------------------------------------------------ query mode


class SearchResult(_Out):
    kind: Literal["document", "memory"]
    chunk_id: str
    document_id: str
    revision_id: str
    knowledge_base_id: str
    title: str
    path: str
    heading_path: list[str] = Field(description="Headings enclosing the passage, outermost first.")
    excerpt: str = Field(description="A bounded excerpt; fetch the full chunk with chunk_ids.")
    citation: Citation
    lexical_rank: int | None = Field(description="1-based rank in the keyword channel, or null.")
    lexical_score: float | None = Field(description="BM25 score (higher is better), or null.")
    semantic_rank: int | None = Field(description="1-based rank in the vector channel, or null.")
    semantic_similarity: float | None = Field(description="Cosine similarity, or null.")
    score: float = Field(description="The fused score results are ordered by.")


class SearchStats(_Out):
    lexical_candidates: int = Field(description="Keyword-channel candidates found in scope.")
    semantic_candidates: int = Field(description="Vector-channel candidates kept in scope.")
    scope_chunks: int | None = Field(description="Chunks inside the scope; null when unscoped.")
    results: int
    has_more: bool = Field(description="More results exist beyond the limit.")
    limit: int = Field(description="The limit applied (after clamping).")
    limit_clamped: bool = Field(description="The requested limit was above 100 and was clamped.")
    filters_unmatched: list[str] = Field(description="Filters that selected nothing.")
    lexical_strategy: str | None = Field(
        description="How the keyword channel found candidates (fts5, postings, scan); null when "
        "it did not run."
    )
    vector_strategy: str | None = Field(
        description="How the vector channel found candidates (sql_exact, vec0_knn, "
        "matrix_exact); null when it did not run."
    )
    elapsed_ms: float


class QueryOutput(_Out):
    request_mode: Literal["query"] = "query"
    query: str
    mode: str = Field(description="The ranking used: hybrid, lexical, semantic or rrf.")
    alpha: float | None
    rrf_k: int | None
    results: list[SearchResult]
    stats: SearchStats


# ------------------------------------------------------------------ targeted read


class ReadOutput(_Out):
    request_mode: Literal["read"] = "read"
    document_id: str
    knowledge_base_id: str
    revision_id: str
    revision_number: int
    is_current_revision: bool
    path: str
    title: str
    status: str
    revision_created_at: str
    content: str = Field(description="The requested window of the revision's text.")
    content_offset: int
    content_limit: int
    content_total_chars: int
    content_truncated: bool = Field(description="Text continues after this window.")
    next_offset: int | None = Field(description="Pass as offset to read on; null at the end.")
    line_start: int
    line_end: int


class OutlineSection(_Out):
    level: int = Field(description="Heading level, 1 = top.")
    title: str
    heading_path: list[str]
    char_start: int = Field(description="Read this section with offset=char_start ...")
    char_end: int = Field(description="... and limit_chars=char_end-char_start (max 10000).")
    line_start: int
    line_end: int


class OutlineOutput(_Out):
    request_mode: Literal["outline"] = "outline"
    document_id: str
    knowledge_base_id: str
    revision_id: str
    path: str
    title: str
    content_total_chars: int
    sections: list[OutlineSection] = Field(
        description="Headings in document order; a section's range includes its subsections. "
        "Empty for plain text and code."
    )


# ------------------------------------------------------------------ chunk fetch


class FetchedChunk(_Out):
    chunk_id: str
    document_id: str
    knowledge_base_id: str
    revision_id: str
    is_current_revision: bool
    title: str
    path: str
    heading_path: list[str]
    text: str
    citation: Citation


class FetchOutput(_Out):
    request_mode: Literal["fetch"] = "fetch"
    chunks: list[FetchedChunk] = Field(description="Found chunks, in the order asked.")
    missing: list[str] = Field(description="Requested ids that are unknown or not readable.")


# ------------------------------------------------------------------ scan


class ScanItem(_Out):
    kind: Literal["document", "memory"]
    knowledge_base_id: str
    document_id: str
    revision_id: str
    revision_number: int
    path: str
    title: str
    updated_at: str
    size_chars: int
    tags: list[tuple[str, str]] = Field(description="[key, value] pairs.")
    excerpt: str = Field(description="The start of the document.")


class ScanOutput(_Out):
    request_mode: Literal["scan"] = "scan"
    results: list[ScanItem] = Field(description="Most recently updated first.")
    since: str | None
    until: str | None
    limit: int
    limit_clamped: bool
    has_more: bool


SearchKnowledgeShape = Annotated[
    QueryOutput | ReadOutput | OutlineOutput | FetchOutput | ScanOutput,
    Field(discriminator="request_mode"),
]


def _union_schema(schema: dict[str, Any]) -> None:
    """An object root (MCP requires it) and `anyOf` instead of pydantic's `oneOf`.

    The branches are mutually exclusive (each pins `request_mode` to a different constant), so
    both mean the same; but a validator must try every branch of a `oneOf` to prove that exactly
    one matches, while `anyOf` stops at the first match. The SDK client validates every result
    against this schema: with `oneOf`, checking a 10-result query response cost ~10 ms per call.
    Query, the hot path, is the first branch.
    """
    schema["anyOf"] = schema.pop("oneOf")
    schema["type"] = "object"


class SearchKnowledgeOutput(RootModel[SearchKnowledgeShape]):
    """One of five shapes, by `request_mode`: query, read, outline, fetch or scan."""

    model_config = ConfigDict(json_schema_extra=_union_schema)


# ------------------------------------------------------------------ listings


class KnowledgeBase(_Out):
    knowledge_base_id: str
    name: str
    description: str
    tags: dict[str, str]
    document_count: int = Field(description="Published documents.")
    chunk_count: int = Field(description="Searchable chunks.")
    created_at: str
    updated_at: str


class KnowledgeBaseList(_Out):
    knowledge_bases: list[KnowledgeBase]


class DocumentInfo(_Out):
    document_id: str
    knowledge_base_id: str
    path: str
    title: str
    status: str
    current_revision_id: str | None
    revision_number: int | None
    size_chars: int
    updated_at: str
    tags: list[tuple[str, str]] = Field(description="[key, value] pairs.")
    metadata: dict[str, Any]


class DocumentPage(_Out):
    documents: list[DocumentInfo] = Field(description="Most recently updated first.")
    next_cursor: str | None = Field(
        description="Pass as cursor for the next page; null at the end."
    )
