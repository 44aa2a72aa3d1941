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
from kbmcp.errors import InvalidRequest, KbError, QueryRequired, ResourceUnavailable
from kbmcp.ids import check_id
from kbmcp.search.models import (
    DEFAULT_ALPHA,
    DEFAULT_LIMIT,
    DEFAULT_MODE,
    MAX_DOCUMENT_IDS,
    MODE_ALIASES,
    MODES,
    SearchFilters,
    SearchRequest,
    SearchResponse,
)
from kbmcp.server import models
from kbmcp.server.arguments import (
    STRING_MAP_SCHEMA,
    as_bool,
    as_int,
    as_number,
    as_scalar_map,
    as_string,
    as_string_list,
    as_string_map,
    param,
    reject_given,
    string_list_schema,
)
from kbmcp.server.auth import LocalOwner, PrincipalSource
from kbmcp.server.errors import kb_error_result
from kbmcp.service import listing, read, scan
from kbmcp.workspace import Workspace

MAX_KNOWLEDGE_BASE_IDS = 100
MAX_DOCUMENT_PATHS = 100
ID_PATTERN = "^{}_[0-9a-f]{{16}}$"

QUERY_ONLY = ["mode", "alpha", "rrf_k", "min_similarity"]
FILTERS = [
    "knowledge_base_ids",
    "document_ids",
    "knowledge_ids",
    "document_paths",
    "tags",
    "metadata",
]
READ_ARGS = ["document_id", "revision_id", "offset", "limit_chars", "outline"]
SCAN_ONLY = ["since", "until"]


@dataclass(frozen=True)
class ServerOptions:
    """Knobs of the tool layer that are not tool parameters."""

    # Candidate depth per search channel passed to the engine (None: engine default). A testing
    # and tuning knob (env KBMCP_SEARCH_CANDIDATES), deliberately not a public tool parameter.
    search_candidates: int | None = None


# ------------------------------------------------------------------ parameter types

Query = param(
    {"type": "string", "minLength": 1},
    "Query mode: what to search for, in natural language or keywords.",
)
Mode = param(
    {"type": "string", "enum": [*MODES, *MODE_ALIASES]},
    "Query mode ranking: hybrid (keyword + semantic, weighted by alpha), lexical (keyword/BM25; "
    "'keyword' is an alias), semantic (embeddings), rrf (reciprocal rank fusion).",
    default=DEFAULT_MODE,
)
Alpha = param(
    {"type": "number", "minimum": 0, "maximum": 1},
    "Hybrid only: weight of the keyword channel (1 = keyword only, 0 = semantic only).",
    default=DEFAULT_ALPHA,
)
RrfK = param(
    {"type": "integer", "minimum": 1},
    "rrf only: the k in 1/(k + rank); larger flattens rank differences. Default 60.",
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
    "Query and scan modes: only these knowledge bases (ids from list_knowledge_bases).",
)
DocumentIds = param(
    string_list_schema(MAX_DOCUMENT_IDS, pattern=ID_PATTERN.format("doc")),
    "Query and scan modes: only these documents (at most 100). Scoping is exact: every filter "
    "applies before ranking and the limit.",
)
KnowledgeIds = param(
    string_list_schema(MAX_DOCUMENT_IDS, pattern=ID_PATTERN.format("doc")),
    "Alias of document_ids (pass one of the two).",
)
DocumentPaths = param(
    string_list_schema(MAX_DOCUMENT_PATHS),
    "Query and scan modes: only documents whose path starts with one of these prefixes.",
)
Tags = param(
    STRING_MAP_SCHEMA,
    'Query and scan modes: only documents carrying every key/value pair, e.g. {"tag": "runbook"}.',
)
Metadata = param(
    {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
    },
    "Query and scan modes: only documents whose metadata has these exact values, e.g. "
    '{"owner": "infra"}.',
)
DocumentId = param(
    {"type": "string", "pattern": ID_PATTERN.format("doc")},
    "Targeted read: the document to read (current revision unless revision_id).",
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
    "Targeted read: window size in characters (1..10000).",
    default=read.DEFAULT_LIMIT_CHARS,
)
Outline = param(
    {"type": "boolean"},
    "Targeted read: return the heading tree with each section's char range instead of text.",
    default=False,
)
ChunkIds = param(
    string_list_schema(read.MAX_CHUNK_IDS, pattern=ID_PATTERN.format("chk")),
    "Chunk fetch: full stored text of these chunks (1..50 ids, e.g. from search results).",
)
Since = param(
    {"type": "string"},
    "Scan mode: only documents updated at or after this ISO 8601 date or date-time.",
)
Until = param(
    {"type": "string"}, "Scan mode: only documents updated before this ISO 8601 date or date-time."
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
            kb_ids = as_string_list(
                knowledge_base_ids,
                "knowledge_base_ids",
                max_items=MAX_KNOWLEDGE_BASE_IDS,
                check=_id_check("knowledge_base", "knowledge_base_ids"),
            )
            prefix = as_string(path_prefix, "path_prefix")
            tag_filter = as_string_map(tags, "tags")
            page_cursor = as_string(cursor, "cursor")
            page_limit = as_int(limit, "limit", minimum=1, maximum=listing.MAX_PAGE)
            page = listing.list_documents(
                self.workspace,
                self.principal(),
                knowledge_base_ids=kb_ids,
                path_prefix=prefix,
                tags=tag_filter,
                cursor=page_cursor,
                limit=page_limit or listing.DEFAULT_PAGE,
            )
            return models.DocumentPageOutput.model_validate(page)

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
            [*READ_ARGS, "chunk_ids"],
            "cannot be combined with query: search first, then read or fetch what you "
            "found in a second call",
        )
        reject_given(args, SCAN_ONLY, "apply to scan mode (no query) only")
        text = as_string(args["query"], "query", allow_blank=True) or ""
        if not text.strip():
            raise QueryRequired("query must not be empty", details={"argument": "query"})
        request = SearchRequest(
            query=text,
            mode=_mode(args["mode"]),
            alpha=_default(as_number(args["alpha"], "alpha", minimum=0, maximum=1), DEFAULT_ALPHA),
            rrf_k=as_int(args["rrf_k"], "rrf_k", minimum=1),
            min_similarity=as_number(
                args["min_similarity"], "min_similarity", minimum=-1, maximum=1
            ),
            limit=_default(as_int(args["limit"], "limit", minimum=1), DEFAULT_LIMIT),
            filters=_filters(args),
            candidates=self.options.search_candidates,
        )
        response = _search(self.workspace, self.principal(), request)
        return models.QueryOutput.model_validate(response)

    def _fetch(self, args: dict[str, Any]) -> BaseModel:
        others = [name for name in args if name != "chunk_ids"]
        reject_given(args, others, "chunk fetch takes chunk_ids only")
        chunk_ids = as_string_list(
            args["chunk_ids"],
            "chunk_ids",
            max_items=read.MAX_CHUNK_IDS,
            check=_id_check("chunk", "chunk_ids"),
        )
        fetched = read.fetch_chunks(self.workspace, self.principal(), chunk_ids or [])
        return models.FetchOutput.model_validate(fetched)

    def _read(self, args: dict[str, Any]) -> BaseModel:
        document_id = as_string(args["document_id"], "document_id")
        if document_id is None:
            reject_given(args, READ_ARGS, "needs document_id (the document to read)")
        reject_given(
            args,
            [*QUERY_ONLY, "limit", *FILTERS, *SCAN_ONLY],
            "a targeted read takes only document_id, revision_id, offset, limit_chars "
            "and outline (limit_chars, not limit, sizes the window)",
        )
        revision_id = as_string(args["revision_id"], "revision_id")
        offset = as_int(args["offset"], "offset", minimum=0)
        limit_chars = as_int(
            args["limit_chars"], "limit_chars", minimum=1, maximum=read.MAX_LIMIT_CHARS
        )
        doc_id = check_id("document", document_id, argument="document_id")
        rev_id = (
            None
            if revision_id is None
            else check_id("revision", revision_id, argument="revision_id")
        )
        try:
            if as_bool(args["outline"], "outline"):
                reject_given(
                    args,
                    ["offset", "limit_chars"],
                    "outline returns the whole heading tree; read a section afterwards "
                    "with offset=char_start and limit_chars",
                )
                tree = read.document_outline(
                    self.workspace, self.principal(), doc_id, revision_id=rev_id
                )
                return models.OutlineOutput.model_validate(tree)
            window = read.read_document(
                self.workspace,
                self.principal(),
                doc_id,
                revision_id=rev_id,
                offset=_default(offset, 0),
                limit_chars=_default(limit_chars, read.DEFAULT_LIMIT_CHARS),
            )
        except ResourceUnavailable as error:
            error.details.setdefault("argument", "revision_id" if rev_id else "document_id")
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
            since=as_string(args["since"], "since"),
            until=as_string(args["until"], "until"),
            limit=_default(as_int(args["limit"], "limit", minimum=1), DEFAULT_LIMIT),
            filters=_filters(args),
        )
        return models.ScanOutput.model_validate(response)

    # -------------------------------------------------------------- plumbing

    def _run(self, produce: Callable[[], BaseModel]) -> CallToolResult:
        try:
            output = produce()
        except KbError as error:
            return kb_error_result(error)
        return ok_result(output)


def ok_result(output: BaseModel) -> CallToolResult:
    data = output.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _search(workspace: Workspace, principal: Principal, request: SearchRequest) -> SearchResponse:
    # Imported here, not at module level: the engine (kbmcp/service/search.py) is developed on
    # another branch; every other mode works without it.
    from kbmcp.service.search import search

    return search(workspace, principal, request)


def _filters(args: dict[str, Any]) -> SearchFilters:
    if args["document_ids"] is not None and args["knowledge_ids"] is not None:
        raise InvalidRequest(
            "knowledge_ids: an alias of document_ids; pass only one of them",
            details={"argument": "knowledge_ids"},
        )
    doc_arg = "knowledge_ids" if args["knowledge_ids"] is not None else "document_ids"
    return SearchFilters(
        knowledge_base_ids=as_string_list(
            args["knowledge_base_ids"],
            "knowledge_base_ids",
            max_items=MAX_KNOWLEDGE_BASE_IDS,
            check=_id_check("knowledge_base", "knowledge_base_ids"),
        ),
        document_ids=as_string_list(
            args[doc_arg], doc_arg, max_items=MAX_DOCUMENT_IDS, check=_id_check("document", doc_arg)
        ),
        document_paths=as_string_list(
            args["document_paths"], "document_paths", max_items=MAX_DOCUMENT_PATHS
        ),
        tags=as_string_map(args["tags"], "tags"),
        metadata=as_scalar_map(args["metadata"], "metadata"),
    )


def _mode(value: Any) -> str:
    text = as_string(value, "mode")
    if text is None:
        return DEFAULT_MODE
    normalised = text.strip().lower()
    normalised = MODE_ALIASES.get(normalised, normalised)
    if normalised not in MODES:
        raise InvalidRequest(
            f"mode: {text!r} is not one of {', '.join([*MODES, *MODE_ALIASES])}",
            details={"argument": "mode", "value": text},
        )
    return normalised


def _id_check(kind: str, argument: str) -> Callable[[str], str]:
    return lambda value: check_id(kind, value, argument=argument)


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value
