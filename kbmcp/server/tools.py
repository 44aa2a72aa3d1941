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
    DEFAULT_MODE,
    MAX_DOCUMENT_IDS,
    MAX_KNOWLEDGE_BASE_IDS,
    MAX_MEMORY_STORE_IDS,
    MAX_PATH_PREFIXES,
    MODE_ALIASES,
    MODES,
    SearchFilters,
    SearchRequest,
)
from kbmcp.server import models
from kbmcp.server.arguments import (
    STRING_MAP_SCHEMA,
    as_bool,
    param,
    reject_given,
    string_list_schema,
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

Query = param(
    {"type": "string", "minLength": 1},
    "Query mode: what to search for, in natural language or keywords; a part in double "
    'quotes ("error budget") matches only those words adjacent and in order.',
)
Mode = param(
    {"type": "string", "enum": [*MODES, *MODE_ALIASES]},
    "Query mode ranking: hybrid (keyword + semantic, weighted by alpha), lexical (keyword/BM25; "
    "'keyword' is an alias), semantic (embeddings), rrf (reciprocal rank fusion). Default: "
    "hybrid, or rrf when only rrf_k is given.",
    default=DEFAULT_MODE,
)
Alpha = param(
    {"type": "number", "minimum": 0, "maximum": 1},
    "Hybrid only: weight of the keyword channel (1 = keyword only, 0 = semantic only). Without "
    "mode it selects hybrid; with another mode it is an error.",
    default=DEFAULT_ALPHA,
)
RrfK = param(
    {"type": "integer", "minimum": 1, "maximum": MAX_RRF_K},
    "rrf only: the k in 1/(k + rank); larger flattens rank differences. Default 60. Without "
    "mode it selects rrf; with another mode it is an error.",
)
MinSimilarity = param(
    {"type": "number", "minimum": -1, "maximum": 1},
    "Query mode: drop vector candidates below this cosine similarity before fusion (keyword hits "
    "are kept).",
)
Limit = param(
    {"type": "integer", "minimum": 1},
    "Query and scan modes: how many results (values above 100 are clamped to 100; the response "
    "says so).",
    default=DEFAULT_LIMIT,
)
KnowledgeBaseIds = param(
    string_list_schema(MAX_KNOWLEDGE_BASE_IDS, pattern=ID_PATTERN.format("kb")),
    "Query and scan modes (and a check on targeted reads): only these knowledge bases (ids "
    "from list_knowledge_bases); a "
    "document filter: without memory_store_ids or include_memories=true, memories are not "
    "searched.",
)
DocumentIds = param(
    string_list_schema(MAX_DOCUMENT_IDS, pattern=ID_PATTERN.format("doc")),
    "Query and scan modes: only these documents (at most 100); memories are not searched "
    "unless memory_store_ids or include_memories=true. Scoping is exact: every filter applies "
    "before ranking and the limit.",
)
KnowledgeIds = param(
    string_list_schema(MAX_DOCUMENT_IDS, pattern=ID_PATTERN.format("doc")),
    "Alias of document_ids (pass one of the two).",
)
DocumentPaths = param(
    string_list_schema(MAX_PATH_PREFIXES),
    "Query and scan modes: only documents whose path starts with one of these prefixes (a "
    "document filter: memories are not searched unless asked for).",
)
Tags = param(
    STRING_MAP_SCHEMA,
    "Query and scan modes: only documents carrying every key/value pair, and memories whose own "
    'tags together with their store\'s carry every pair, e.g. {"tag": "runbook"}.',
)
Metadata = param(
    {
        "type": "object",
        "minProperties": 1,
        # anyOf, not a type array: strict schema checkers (the MCP inspector's --strict) warn
        # about type arrays.
        "additionalProperties": {
            "anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
        },
    },
    "Query and scan modes: only documents whose metadata has these exact values, e.g. "
    '{"owner": "infra"} (a document filter: memories are not searched unless asked for).',
)
MemoryStoreIds = param(
    string_list_schema(MAX_MEMORY_STORE_IDS, pattern=ID_PATTERN.format("mst")),
    "Query and scan modes: only memories of these stores (mst_... ids from remember or from "
    "results); documents are searched too only with a document filter or "
    "include_documents=true.",
)
IncludeDocuments = param(
    {"type": "boolean"},
    "Query and scan modes: search documents (default: yes when you may read them, unless only "
    "memory filters are given).",
)
IncludeMemories = param(
    {"type": "boolean"},
    "Query and scan modes: search memories (default: yes when you may read them, unless only "
    "document filters are given). Both include_* false is an error.",
)
RecencyHalfLifeDays = param(
    {"type": "number", "minimum": 0},
    "Query mode: memories lose half their score every this many days since they were last "
    "updated (score * 2^(-age_days / half_life)); 0 turns decay off. Documents are never "
    "decayed. Default: the server's setting (0 unless configured).",
)
IncludeContent = param(
    {"type": "boolean"},
    "Query mode: true puts the text of the first five distinct documents found into their "
    "first result (content: a read window from offset 0 of limit_chars characters, default "
    "4000, with next_offset to read on; a memory whole), so one call finds and reads.",
    default=False,
)
Content = param(
    {"type": "string", "minLength": 1, "maxLength": memories.MAX_MEMORY_CHARS},
    "The fact to remember, in a sentence or a short paragraph that stands on its own.",
)
RememberStoreId = param(
    {"type": "string", "pattern": ID_PATTERN.format("mst")},
    "The memory store (default: your 'memories' store, created on first use).",
)
MemoryTags = param(
    {**STRING_MAP_SCHEMA, "maxProperties": memories.MAX_TAGS},
    'Key/value tags to filter by later, e.g. {"topic": "deploy"}.',
)
MemorySource = param(
    {"type": "string", "maxLength": memories.MAX_SOURCE_CHARS},
    "Where the fact comes from (a conversation, a ticket, a URL), kept with the memory.",
)
MemoryId = param(
    {"type": "string", "pattern": ID_PATTERN.format("mem")},
    "The memory to forget (mem_... from remember or from a search result's document_id).",
)
ReviseMemoryId = param(
    {"type": "string", "pattern": ID_PATTERN.format("mem")},
    "Replace this memory's content instead of adding a memory (a new revision under the same "
    "id; use it to correct a fact). Not with memory_store_id.",
)
DocumentId = param(
    {"type": "string", "pattern": ID_PATTERN.format("(doc|mem)")},
    "Targeted read: the document (or memory, mem_...) to read (current revision unless "
    "revision_id). With knowledge_base_ids, it must lie in one of them.",
)
RevisionId = param(
    {"type": "string", "pattern": ID_PATTERN.format("rev")},
    "Targeted read: an exact (possibly older) revision of document_id, e.g. the "
    "revision_id of a citation.",
)
Offset = param(
    {"type": "integer", "minimum": 0},
    "Targeted read: first character of the window (use next_offset or an outline "
    "section's char_start).",
    default=0,
)
LimitChars = param(
    {"type": "integer", "minimum": 1, "maximum": read.MAX_LIMIT_CHARS},
    "Targeted read: window size in characters (1..10000). Query mode with include_content: "
    "the size of each inlined text.",
    default=read.DEFAULT_LIMIT_CHARS,
)
Outline = param(
    {"type": "boolean"},
    "Targeted read: return the heading tree with each section's char range instead of text.",
    default=False,
)
ChunkIds = param(
    string_list_schema(read.MAX_CHUNK_IDS, pattern=ID_PATTERN.format("chk")),
    "Chunk fetch: the stored text of these chunks (1..50 ids, e.g. from search results); each "
    "is a fragment of its revision unless it says covers_whole_revision.",
)
Since = param(
    {"type": "string"},
    "Scan mode: only documents updated (created, with sort=created_desc) at or after this ISO "
    "8601 date or date-time.",
)
Until = param(
    {"type": "string"},
    "Scan mode: only documents updated (created, with sort=created_desc) before this ISO 8601 "
    "date or date-time.",
)
Sort = param(
    {"type": "string", "enum": list(scan.SORTS)},
    "Scan mode: updated_desc (most recently updated first) or created_desc (most recently added "
    "first); since/until then apply to the same time.",
    default=scan.DEFAULT_SORT,
)
ListKnowledgeBaseIds = param(
    string_list_schema(MAX_KNOWLEDGE_BASE_IDS, pattern=ID_PATTERN.format("kb")),
    "Only documents of these knowledge bases (ids from list_knowledge_bases).",
)
ListTags = param(
    STRING_MAP_SCHEMA, 'Only documents carrying every key/value pair, e.g. {"tag": "runbook"}.'
)
PathPrefix = param(
    {"type": "string", "minLength": 1}, "Only documents whose path starts with this."
)
Cursor = param({"type": "string"}, "next_cursor of the previous page.")
PageLimit = param(
    {"type": "integer", "minimum": 1, "maximum": listing.MAX_PAGE},
    "Page size (1..200).",
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
        args = dict(locals())
        del args["self"]
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
