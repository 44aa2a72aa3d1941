"""Documents and memory stores as MCP resources, for clients that attach context by browsing
resources rather than calling tools (desktop apps, editors, the inspector).

- `resources/list` (paginated): the caller's readable documents (current revisions), then its
  memory stores;
- `resources/templates/list`: a document (`kbmcp://documents/{document_id}`, a memory's mem_ id
  too), an exact revision (`.../revisions/{revision_id}`) and one section of the outline
  (`.../sections/{section}`, 1-based, as outline=true numbers them in order);
- `resources/read`: the text, with its MIME type, and `_meta` saying which revision it is and
  the reference to cite it by.

Every request runs the same service functions as the tools, as the same caller (the bearer
token's principal, KBMCP_TOKEN's or the local owner): the same scopes, knowledge-base allow-lists
and shares, decided on each request, so a revoked share hides its resources on the next one. A
resource the caller cannot read is answered exactly like one that does not exist.

The SDK's MCPServer serves only resources registered in advance, the same for every caller; these
handlers replace its three on the low-level server (`add_request_handler` replaces a method's
handler), which also keeps the `resources` capability: it is announced because it is served.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Annotations,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Principal
from kbmcp.errors import KbError, ResourceUnavailable
from kbmcp.ingest.formats import kind_of
from kbmcp.search.models import reference
from kbmcp.server.auth import PrincipalSource
from kbmcp.server.protocol import lowlevel
from kbmcp.service import listing, memories, read
from kbmcp.workspace import Workspace

SCHEME = "kbmcp://"
DOCUMENT_TEMPLATE = SCHEME + "documents/{document_id}"
REVISION_TEMPLATE = SCHEME + "documents/{document_id}/revisions/{revision_id}"
SECTION_TEMPLATE = SCHEME + "documents/{document_id}/sections/{section}"
MEMORY_STORE_URI = SCHEME + "memory-stores/{memory_store_id}"
_SEGMENT = r"([^/?#]+)"
URI_PATTERNS: dict[str, re.Pattern[str]] = {
    "document": re.compile(rf"kbmcp://documents/{_SEGMENT}"),
    "revision": re.compile(rf"kbmcp://documents/{_SEGMENT}/revisions/{_SEGMENT}"),
    "section": re.compile(rf"kbmcp://documents/{_SEGMENT}/sections/([0-9]{{1,6}})"),
    "memory_store": re.compile(rf"kbmcp://memory-stores/{_SEGMENT}"),
}
# JSON-RPC code of "resource not found" in the MCP specification (resources, Error Handling).
RESOURCE_NOT_FOUND = -32002
# Documents per resources/list page (list_documents' pages are at most listing.MAX_PAGE).
PAGE = 100
# The most recent memories a memory store's resource shows (search_knowledge finds the rest).
STORE_MEMORIES = 200
MARKDOWN = "text/markdown"
PLAIN = "text/plain"

TEMPLATES = [
    ResourceTemplate(
        name="document",
        title="A document",
        uri_template=DOCUMENT_TEMPLATE,
        description="The current text of a document (doc_...) or memory (mem_...).",
    ),
    ResourceTemplate(
        name="revision",
        title="A revision of a document",
        uri_template=REVISION_TEMPLATE,
        description="The exact text of one revision (a citation's revision_id).",
    ),
    ResourceTemplate(
        name="section",
        title="A section of a document",
        uri_template=SECTION_TEMPLATE,
        description="One section of the current revision: the n-th heading of its outline "
        "(1-based, in order; search_knowledge with outline=true lists them).",
    ),
]

T = TypeVar("T")


def mime_type(document_format: str) -> str:
    """What a document's stored text is: Markdown for Markdown sources, else plain text (the
    text extracted from HTML and PDF, code, reStructuredText, memories)."""
    return MARKDOWN if document_format == "markdown" else PLAIN


@dataclass(frozen=True)
class ResourceServer:
    workspace: Workspace
    principals: PrincipalSource

    def register(self, server: MCPServer) -> None:
        low = lowlevel(server)
        low.add_request_handler("resources/list", PaginatedRequestParams, self.list_resources)
        low.add_request_handler(
            "resources/templates/list", PaginatedRequestParams, self.list_templates
        )
        low.add_request_handler("resources/read", ReadResourceRequestParams, self.read_resource)

    # ------------------------------------------------------------------ handlers

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams
    ) -> ListResourcesResult:
        return await self._run(lambda principal: self._page(principal, params.cursor))

    async def list_templates(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=TEMPLATES)

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        return await self._run(lambda principal: self._read(principal, uri))

    async def _run(self, produce: Callable[[Principal], T]) -> T:
        """`produce` in a worker thread (the service functions are synchronous and read the
        database), as the current caller; kbmcp's errors become JSON-RPC errors that carry the
        error body the tools return."""

        def run() -> T:
            return produce(self.principals.current())

        try:
            return await anyio.to_thread.run_sync(run)
        except KbError as error:
            code = {
                "resource_unavailable": RESOURCE_NOT_FOUND,
                "internal_error": INTERNAL_ERROR,
            }.get(error.code, INVALID_PARAMS)
            raise MCPError(code=code, message=error.message, data=error.to_dict()) from error

    # ------------------------------------------------------------------ resources/list

    def _page(self, principal: Principal, cursor: str | None) -> ListResourcesResult:
        """Documents a page at a time, then (on the page where they end) the memory stores."""
        after = _decode_cursor(cursor)
        resources: list[Resource] = []
        next_cursor = None
        if KNOWLEDGE_READ in principal.scopes:
            names = {
                kb.knowledge_base_id: kb.name
                for kb in listing.list_knowledge_bases(self.workspace, principal)
            }
            page = listing.list_documents(self.workspace, principal, cursor=after, limit=PAGE)
            resources += [_document_resource(doc, names) for doc in page.documents]
            if page.next_cursor is not None:
                next_cursor = _encode_cursor(page.next_cursor)
        if next_cursor is None and MEMORY_READ in principal.scopes:
            stores = memories.list_memory_stores(self.workspace, principal)
            resources += [_store_resource(store) for store in stores]
        return ListResourcesResult(resources=resources, next_cursor=next_cursor)

    # ------------------------------------------------------------------ resources/read

    def _read(self, principal: Principal, uri: str) -> ReadResourceResult:
        kind, parts = _parse(uri)
        if kind == "memory_store":
            return self._read_store(principal, uri, parts[0])
        if kind == "section":
            section = read.section_text(self.workspace, principal, parts[0], int(parts[1]))
            revision = section.document.revision
            return _text_result(
                uri,
                section.text,
                mime_type(revision.kind),
                revision,
                reference(
                    revision.knowledge_base_name,
                    revision.path,
                    section.line_start,
                    section.line_end,
                    revision.revision_id,
                ),
                {"section": section.number, "heading": section.title},
            )
        revision_id = parts[1] if kind == "revision" else None
        document = read.document_text(self.workspace, principal, parts[0], revision_id=revision_id)
        revision = document.revision
        cited = reference(
            revision.knowledge_base_name, revision.path, 1, document.line_end, revision.revision_id
        )
        return _text_result(uri, document.text, mime_type(revision.kind), revision, cited, {})

    def _read_store(self, principal: Principal, uri: str, store_id: str) -> ReadResourceResult:
        stores = memories.list_memory_stores(self.workspace, principal)
        store = next((s for s in stores if s.memory_store_id == store_id.strip()), None)
        if store is None:
            raise ResourceUnavailable(
                f"memory store {store_id} does not exist or is not readable",
                details={"memory_store_id": store_id},
            )
        recent = memories.list_memories(
            self.workspace, principal, memory_store=store.memory_store_id, limit=STORE_MEMORIES
        )
        lines = [f"# Memory store {store.name}", ""]
        for memory in recent:
            tags = f" {json.dumps(memory.tags, ensure_ascii=False)}" if memory.tags else ""
            text = " ".join(memory.content.split())
            lines.append(f"- {memory.memory_id} ({memory.updated_at}){tags}: {text}")
        if store.memory_count > len(recent):
            lines += ["", f"({store.memory_count - len(recent)} older memories: search_knowledge "
                          f"with memory_store_ids finds them.)"]  # fmt: skip
        contents = TextResourceContents(uri=uri, mime_type=MARKDOWN, text="\n".join(lines) + "\n")
        return ReadResourceResult(contents=[contents])


def _document_resource(doc: listing.DocumentInfo, kb_names: dict[str, str]) -> Resource:
    kb_name = kb_names.get(doc.knowledge_base_id, doc.knowledge_base_id)
    return Resource(
        uri=DOCUMENT_TEMPLATE.format(document_id=doc.document_id),
        name=f"{kb_name}:{doc.path}",
        title=doc.title or doc.path,
        description=f"{doc.path} in the knowledge base {kb_name} ({doc.size_chars} characters)",
        mime_type=mime_type(kind_of(doc.path) or "text"),
        annotations=Annotations(last_modified=doc.updated_at),
    )


def _store_resource(store: memories.MemoryStoreInfo) -> Resource:
    return Resource(
        uri=MEMORY_STORE_URI.format(memory_store_id=store.memory_store_id),
        name=f"memories:{store.name}",
        title=f"Memory store {store.name}",
        description=f"{store.memory_count} memories, the most recent {STORE_MEMORIES} shown",
        mime_type=MARKDOWN,
    )


def _text_result(
    uri: str,
    text: str,
    mime: str,
    revision: Any,
    cited: str,
    extra: dict[str, Any],
) -> ReadResourceResult:
    meta = {
        "document_id": revision.document_id,
        "revision_id": revision.revision_id,
        "is_current_revision": revision.is_current,
        "sha256": revision.sha256,
        "reference": cited,
        **extra,
    }
    contents = TextResourceContents(uri=uri, mime_type=mime, text=text, _meta=meta)
    return ReadResourceResult(contents=[contents])


def _parse(uri: str) -> tuple[str, tuple[str, ...]]:
    for kind, pattern in URI_PATTERNS.items():
        match = pattern.fullmatch(uri)
        if match:
            return kind, match.groups()
    raise MCPError(
        code=INVALID_PARAMS,
        message=f"{uri!r} is not a kbmcp resource; the templates are {DOCUMENT_TEMPLATE}, "
        f"{REVISION_TEMPLATE}, {SECTION_TEMPLATE} (and {MEMORY_STORE_URI} from resources/list)",
        data={"uri": uri},
    )


def _encode_cursor(documents_cursor: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"documents": documents_cursor}).encode()).decode()


def _decode_cursor(cursor: str | None) -> str | None:
    """The list_documents cursor inside a resources/list cursor (None: the first page)."""
    if cursor is None:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        inner = decoded["documents"]
        if not isinstance(inner, str):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        raise MCPError(
            code=INVALID_PARAMS, message="cursor is not a nextCursor of resources/list"
        ) from None
    return inner
