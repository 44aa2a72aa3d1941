"""The MCP tools: thin adapters from flat tool arguments to the service layer (no SQL here).

Each tool checks its arguments (kbmcp/server/arguments.py), calls one service function (service
functions hold the workspace lock while they use the shared connection: see
`kbmcp.workspace.holding_lock`), and returns the result model as `structuredContent` plus the
same JSON as a text block for clients that only read text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from kbmcp.access import Principal
from kbmcp.config import MAX_RRF_K
from kbmcp.errors import KbError, QueryRequired, ResourceUnavailable
from kbmcp.search.models import (
    DEFAULT_ALPHA,
    DEFAULT_LIMIT,
    MAX_DOCUMENT_IDS,
    MAX_FILTER_PAIRS,
    MAX_INLINED_DOCUMENTS,
    MAX_KNOWLEDGE_BASE_IDS,
    MAX_LIMIT,
    MAX_MEMORY_STORE_IDS,
    MAX_PATH_PREFIXES,
    MAX_QUERY_CHARS,
    MODE_ALIASES,
    MODES,
    SearchFilters,
    SearchRequest,
)
from kbmcp.search.request import MAX_HALF_LIFE
from kbmcp.server import models
from kbmcp.server.arguments import (
    STRING_MAP_SCHEMA_OR_EMPTY,
    as_bool,
    declared_defaults,
    param,
    reject_given,
    string_list_schema,
    tag_filter_schema,
    without_declared_defaults,
)
from kbmcp.server.auth import LocalOwner, PrincipalSource
from kbmcp.server.errors import kb_error_result
from kbmcp.service import listing, memories, read, scan
from kbmcp.service.search import search
from kbmcp.workspace import Workspace

ID_PATTERN = "^{}_[0-9a-f]{{16}}$"

QUERY_ONLY = [
    "mode",
    "alpha",
    "rrf_k",
    "min_similarity",
    "recency_half_life_days",
    "include_content",
]
FILTERS = [
    "knowledge_base_ids",
    "document_ids",
    "knowledge_ids",
    "document_paths",
    "tags",
    "metadata",
    "memory_store_ids",
    "include_documents",
    "include_memories",
]
READ_ARGS = ["document_id", "revision_id", "offset", "limit_chars", "outline"]
# A targeted read is checked against knowledge_base_ids (the document must lie in one of them);
# the other filters select among many documents and mean nothing for one.
READ_REJECTS_FILTERS = [name for name in FILTERS if name != "knowledge_base_ids"]
SCAN_ONLY = ["since", "until", "sort"]


@dataclass(frozen=True)
class ServerOptions:
    """Knobs of the tool layer that are not tool parameters."""

    # Candidate depth per search channel passed to the engine (None: engine default). A testing
    # and tuning knob (env KBMCP_SEARCH_CANDIDATES), deliberately not a public tool parameter.
    search_candidates: int | None = None


# ------------------------------------------------------------------ parameter types

# Descriptions say what changes a call and nothing else: every agent pays for each word in its
# context on every request. Examples and the long explanations live in docs/tools.md and the
# server's instructions. Bounds come from the constants the validators use (a test compares the
# schema with the server's answers both ways), and text that depends on the server's settings
# is added when the server is built (kbmcp/server/schema.py).
NONBLANK = "\\S"  # a string with at least one non-space character: blank ones are refused

Query = param(
    {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": NONBLANK},
    'Query mode: what to find; "quoted words" match as a phrase.',
)
Mode = param(
    {"type": "string", "enum": [*MODES, *MODE_ALIASES]},
    "hybrid (keyword + semantic by alpha), lexical (alias keyword), semantic or rrf. Omitted: "
    "alpha's or rrf_k's mode, else hybrid.",
)
Alpha = param(
    {"type": "number", "minimum": 0, "maximum": 1},
    "hybrid only: keyword weight (1 keyword only, 0 semantic only).",
    default=DEFAULT_ALPHA,
)
RrfK = param(
    {"type": "integer", "minimum": 1, "maximum": MAX_RRF_K},
    "rrf only: the k of 1/(k + rank); larger flattens the ranking.",
)
MinSimilarity = param(
    {"type": "number", "minimum": -1, "maximum": 1},
    "Cosine floor for semantic candidates before fusion; keyword hits and explicit targets "
    "(document_ids, exact document_paths) are exempt.",
)
Limit = param(
    {"type": "integer", "minimum": 1},
    f"Results (query, scan); above {MAX_LIMIT} is clamped.",
    default=DEFAULT_LIMIT,
)
KnowledgeBaseIds = param(
    string_list_schema(MAX_KNOWLEDGE_BASE_IDS, pattern=ID_PATTERN.format("kb")),
    "Only these knowledge bases (a read: one must hold the document).",
)
DocumentIds = param(
    string_list_schema(MAX_DOCUMENT_IDS, pattern=ID_PATTERN.format("doc")),
    "Only these documents.",
)
KnowledgeIds = param(
    string_list_schema(MAX_DOCUMENT_IDS, pattern=ID_PATTERN.format("doc")),
    "Alias of document_ids.",
)
DocumentPaths = param(
    string_list_schema(MAX_PATH_PREFIXES, item_pattern=NONBLANK),
    "Only documents whose path starts with one of these.",
)
Tags = param(
    tag_filter_schema(MAX_FILTER_PAIRS, min_properties=1),
    "Every pair must match (a memory's tags include its store's); a list: every value.",
)
Metadata = param(
    {
        "type": "object",
        "minProperties": 1,
        "maxProperties": MAX_FILTER_PAIRS,
        # anyOf, not a type array: strict schema checkers (the MCP inspector's --strict) warn
        # about type arrays.
        "additionalProperties": {
            "anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
        },
    },
    "Only documents whose metadata has these values.",
)
MemoryStoreIds = param(
    string_list_schema(MAX_MEMORY_STORE_IDS, pattern=ID_PATTERN.format("mst")),
    "Only memories of these stores.",
)
IncludeDocuments = param(
    {"type": "boolean"},
    "Search documents (omitted: yes unless only memory filters are given).",
)
IncludeMemories = param(
    {"type": "boolean"},
    "Search memories (omitted: yes unless only document filters are given).",
)
RecencyHalfLifeDays = param(
    {"type": "number", "minimum": 0, "maximum": MAX_HALF_LIFE},
    "Memories' scores halve every this many days of age; 0: no decay.",
)
IncludeContent = param(
    {"type": "boolean"},
    f"Query: also return the first {MAX_INLINED_DOCUMENTS} found documents' text (limit_chars "
    "each).",
    default=False,
)
Content = param(
    {"type": "string", "minLength": 1, "maxLength": memories.MAX_MEMORY_CHARS, "pattern": NONBLANK},
    "The fact to remember, standing on its own.",
)
RememberStoreId = param(
    {"type": "string", "pattern": ID_PATTERN.format("mst")},
    "The store (omitted: your 'memories' store).",
)
MemoryTags = param(
    {**STRING_MAP_SCHEMA_OR_EMPTY, "maxProperties": memories.MAX_TAGS},
    "Key/value tags to filter by later.",
)
MemorySource = param(
    {"type": "string", "maxLength": memories.MAX_SOURCE_CHARS},
    "Where the fact comes from.",
)
MemoryId = param(
    {"type": "string", "pattern": ID_PATTERN.format("mem")},
    "The memory to forget.",
)
ReviseMemoryId = param(
    {"type": "string", "pattern": ID_PATTERN.format("mem")},
    "Correct this memory's content instead of adding one (not with memory_store_id).",
)
DocumentId = param(
    {"type": "string", "pattern": ID_PATTERN.format("(doc|mem)")},
    "Targeted read: the document (or memory).",
)
RevisionId = param(
    {"type": "string", "pattern": ID_PATTERN.format("rev")},
    "Targeted read: this exact (possibly older) revision.",
)
Offset = param(
    {"type": "integer", "minimum": 0},
    "Targeted read: first character (next_offset, a section's char_start).",
    default=0,
)
LimitChars = param(
    {"type": "integer", "minimum": 1, "maximum": read.MAX_LIMIT_CHARS},
    "Characters of a read, or of each include_content text.",
    default=read.DEFAULT_LIMIT_CHARS,
)
Outline = param(
    {"type": "boolean"},
    "Targeted read: the heading tree with char ranges instead of text.",
    default=False,
)
ChunkIds = param(
    string_list_schema(read.MAX_CHUNK_IDS, pattern=ID_PATTERN.format("chk")),
    "Chunk fetch: the full text of these chunks.",
)
Since = param(
    {"type": "string", "minLength": 1},
    "Scan: updated (or created, by sort) at or after this ISO 8601 date or time.",
)
Until = param(
    {"type": "string", "minLength": 1},
    "Scan: updated (or created, by sort) before this ISO 8601 date or time.",
)
Sort = param(
    {"type": "string", "enum": list(scan.SORTS)},
    "Scan: newest first by update or by creation.",
    default=scan.DEFAULT_SORT,
)
ListKnowledgeBaseIds = param(
    string_list_schema(MAX_KNOWLEDGE_BASE_IDS, pattern=ID_PATTERN.format("kb")),
    "Only documents of these knowledge bases.",
)
ListTags = param(
    tag_filter_schema(MAX_FILTER_PAIRS, min_properties=0),
    "Only documents carrying every pair (a list: every value).",
)
PathPrefix = param(
    {"type": "string", "minLength": 1, "pattern": NONBLANK},
    "Only documents whose path starts with this.",
)
Cursor = param({"type": "string"}, "next_cursor of the previous page.")
PageLimit = param(
    {"type": "integer", "minimum": 1, "maximum": listing.MAX_PAGE},
    "Page size.",
    default=listing.DEFAULT_PAGE,
)


class KbTools:
    """The tool functions, bound to one workspace."""

    def __init__(
        self,
        workspace: Workspace,
        options: ServerOptions | None = None,
        principals: PrincipalSource | None = None,
    ) -> None:
        self.workspace = workspace
        self.options = options or ServerOptions()
        self._principals = principals or LocalOwner(workspace)

    def principal(self) -> Principal:
        """The caller of the current tool call (kbmcp/server/auth.py): the bearer token's
        tenant over HTTP, KBMCP_TOKEN's or the local owner over stdio."""
        return self._principals.current()

    # -------------------------------------------------------------- tools

    def search_knowledge(
        self,
        query: Query = None,
        mode: Mode = None,
        alpha: Alpha = None,
        rrf_k: RrfK = None,
        min_similarity: MinSimilarity = None,
        limit: Limit = None,
        knowledge_base_ids: KnowledgeBaseIds = None,
        document_ids: DocumentIds = None,
        knowledge_ids: KnowledgeIds = None,
        document_paths: DocumentPaths = None,
        tags: Tags = None,
        metadata: Metadata = None,
        document_id: DocumentId = None,
        revision_id: RevisionId = None,
        offset: Offset = None,
        limit_chars: LimitChars = None,
        outline: Outline = None,
        chunk_ids: ChunkIds = None,
        since: Since = None,
        until: Until = None,
        sort: Sort = None,
        memory_store_ids: MemoryStoreIds = None,
        include_documents: IncludeDocuments = None,
        include_memories: IncludeMemories = None,
        recency_half_life_days: RecencyHalfLifeDays = None,
        include_content: IncludeContent = None,
    ) -> Annotated[CallToolResult, models.SearchKnowledgeOutput]:
        given = dict(locals())
        del given["self"]
        args = without_declared_defaults(given, SEARCH_DEFAULTS)
        return self._run(lambda: self._search_knowledge(args))

    def list_knowledge_bases(self) -> Annotated[CallToolResult, models.KnowledgeBaseList]:
        def run() -> BaseModel:
            kbs = listing.list_knowledge_bases(self.workspace, self.principal())
            return models.KnowledgeBaseList(knowledge_bases=kbs)

        return self._run(run)

    def list_documents(
        self,
        knowledge_base_ids: ListKnowledgeBaseIds = None,
        path_prefix: PathPrefix = None,
        tags: ListTags = None,
        cursor: Cursor = None,
        limit: PageLimit = None,
    ) -> Annotated[CallToolResult, models.DocumentPageOutput]:
        def run() -> BaseModel:
            page = listing.list_documents(
                self.workspace,
                self.principal(),
                knowledge_base_ids=knowledge_base_ids,
                path_prefix=path_prefix,
                tags=tags,
                cursor=cursor,
                limit=_default(limit, listing.DEFAULT_PAGE),
            )
            return models.DocumentPageOutput.model_validate(page)

        return self._run(run)

    def remember(
        self,
        content: Content,
        memory_store_id: RememberStoreId = None,
        tags: MemoryTags = None,
        source: MemorySource = None,
        memory_id: ReviseMemoryId = None,
    ) -> Annotated[CallToolResult, models.RememberOutput]:
        def run() -> BaseModel:
            result = memories.remember(
                self.workspace,
                self.principal(),
                content,
                memory_store_id=memory_store_id,
                tags=tags,
                source=source,
                memory_id=memory_id,
            )
            return models.RememberOutput.model_validate(result)

        return self._run(run)

    def list_memory_stores(self) -> Annotated[CallToolResult, models.MemoryStoreList]:
        def run() -> BaseModel:
            stores = memories.list_memory_stores(self.workspace, self.principal())
            return models.MemoryStoreList(memory_stores=stores)

        return self._run(run)

    def forget(self, memory_id: MemoryId) -> Annotated[CallToolResult, models.ForgetOutput]:
        def run() -> BaseModel:
            result = memories.forget(self.workspace, self.principal(), memory_id)
            return models.ForgetOutput.model_validate(result)

        return self._run(run)

    # -------------------------------------------------------------- search_knowledge modes

    def _search_knowledge(self, args: dict[str, Any]) -> BaseModel:
        if args["query"] is not None:
            return self._query(args)
        if args["chunk_ids"] is not None:
            return self._fetch(args)
        if any(args[name] is not None for name in READ_ARGS):
            return self._read(args)
        return self._scan(args)

    def _query(self, args: dict[str, Any]) -> BaseModel:
        reject_given(
            args,
            [*(name for name in READ_ARGS if name != "limit_chars"), "chunk_ids"],
            "cannot be combined with query: search first, then read or fetch what you "
            "found in a second call (or pass include_content: true to get the text of the "
            "first documents found)",
        )
        reject_given(args, SCAN_ONLY, "apply to scan mode (no query) only")
        # Values go to the service as they came: it is the single validator.
        request = SearchRequest(
            query=args["query"],
            mode=args["mode"],
            alpha=args["alpha"],
            rrf_k=args["rrf_k"],
            min_similarity=args["min_similarity"],
            limit=_default(args["limit"], DEFAULT_LIMIT),
            filters=_filters(args),
            candidates=self.options.search_candidates,
            recency_half_life_days=args["recency_half_life_days"],
            include_content=args["include_content"],
            content_limit_chars=args["limit_chars"],
        )
        response = search(self.workspace, self.principal(), request)
        return models.QueryOutput.model_validate(response)

    def _fetch(self, args: dict[str, Any]) -> BaseModel:
        others = [name for name in args if name != "chunk_ids"]
        reject_given(args, others, "chunk fetch takes chunk_ids only")
        fetched = read.fetch_chunks(self.workspace, self.principal(), args["chunk_ids"])
        return models.FetchOutput.model_validate(fetched)

    def _read(self, args: dict[str, Any]) -> BaseModel:
        document_id = args["document_id"]
        if document_id is None:
            reject_given(args, READ_ARGS, "needs document_id (the document to read)")
        reject_given(
            args,
            [*QUERY_ONLY, "limit", *READ_REJECTS_FILTERS, *SCAN_ONLY],
            "a targeted read takes only document_id, revision_id, offset, limit_chars, "
            "outline and knowledge_base_ids (limit_chars, not limit, sizes the window)",
        )
        revision_id = args["revision_id"]
        kb_ids = args["knowledge_base_ids"]
        try:
            if as_bool(args["outline"], "outline"):
                reject_given(
                    args,
                    ["offset", "limit_chars"],
                    "outline returns the whole heading tree; read a section afterwards "
                    "with offset=char_start and limit_chars",
                )
                tree = read.document_outline(
                    self.workspace,
                    self.principal(),
                    document_id,
                    revision_id=revision_id,
                    knowledge_base_ids=kb_ids,
                )
                return models.OutlineOutput.model_validate(tree)
            window = read.read_document(
                self.workspace,
                self.principal(),
                document_id,
                revision_id=revision_id,
                offset=_default(args["offset"], 0),
                limit_chars=_default(args["limit_chars"], read.DEFAULT_LIMIT_CHARS),
                knowledge_base_ids=kb_ids,
            )
        except ResourceUnavailable as error:
            error.details.setdefault("argument", "revision_id" if revision_id else "document_id")
            raise
        return models.ReadOutput.model_validate(window)

    def _scan(self, args: dict[str, Any]) -> BaseModel:
        given = [name for name in QUERY_ONLY if args[name] is not None]
        if given:
            raise QueryRequired(
                f"{', '.join(given)}: used by query mode only; pass a query as well (without "
                "a query, search_knowledge lists recently updated documents)",
                details={"argument": given[0], "arguments": given},
            )
        response = scan.scan_recent(
            self.workspace,
            self.principal(),
            since=args["since"],
            until=args["until"],
            limit=_default(args["limit"], DEFAULT_LIMIT),
            filters=_filters(args),
            sort=args["sort"],
        )
        return models.ScanOutput.model_validate(response)

    # -------------------------------------------------------------- plumbing

    def _run(self, produce: Callable[[], BaseModel]) -> CallToolResult:
        try:
            # (made again on a new connection if the database server dropped this one)
            output = self.workspace.run_request(produce)
        except KbError as error:
            return kb_error_result(error)
        return ok_result(output)


# What search_knowledge's parameters declare as defaults (sent, they count as not given).
SEARCH_DEFAULTS = declared_defaults(KbTools.search_knowledge)


def ok_result(output: BaseModel) -> CallToolResult:
    data = output.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _filters(args: dict[str, Any]) -> SearchFilters:
    """The filter arguments as they came (the service validates them, and names `knowledge_ids`,
    the alias of `document_ids`, in errors when that is what the caller sent)."""
    return SearchFilters(
        knowledge_base_ids=args["knowledge_base_ids"],
        document_ids=args["document_ids"],
        knowledge_ids=args["knowledge_ids"],
        document_paths=args["document_paths"],
        tags=args["tags"],
        metadata=args["metadata"],
        memory_store_ids=args["memory_store_ids"],
        include_documents=args["include_documents"],
        include_memories=args["include_memories"],
    )


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value
