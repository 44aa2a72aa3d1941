"""The pages: one handler each, calling the service functions the MCP tools call.

Every handler runs as the request's caller (kbmcp/web/auth.py) and reaches the data only
through kbmcp/service/, with that caller's principal: what a token cannot read over MCP it
cannot see here, and an id it cannot read answers exactly as an unknown one (404, "does not
exist or is not readable"). Service calls are synchronous and use the workspace's per-thread
connections, so each page gathers its data in one worker thread, as a tool call does.

Status codes: a bad field 400, no token or a refused one 401 (the sign-in page), a missing
scope or a post from another site 403, an unknown or unreadable id 404; each is a whole page
saying why in one line.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from kbmcp import __version__
from kbmcp.access import ADMIN, KNOWLEDGE_READ, MEMORY_READ, MEMORY_WRITE
from kbmcp.clock import now
from kbmcp.errors import Forbidden, InvalidRequest, KbError, ResourceUnavailable
from kbmcp.ids import check_id
from kbmcp.server.tools import ServerOptions
from kbmcp.service import listing, memories, read
from kbmcp.service.search import search
from kbmcp.web import forms
from kbmcp.web.auth import Caller, TokenNeeded, WebAuth
from kbmcp.web.headers import cross_site
from kbmcp.web.passage import WINDOW, mark, window_offset
from kbmcp.web.render import environment
from kbmcp.web.views import decay_weight, identity
from kbmcp.workspace import Workspace

logger = logging.getLogger(__name__)

T = TypeVar("T")
Handler = Callable[[Request, Caller], Awaitable[Response]]

STATUS_OF_CODE = {
    "invalid_request": 400,
    "query_required": 400,
    "forbidden": 403,
    "resource_unavailable": 404,
    "read_only": 409,
    "model_mismatch": 503,
    "model_unavailable": 503,
    "disk_full": 507,
}
DOCUMENT_PAGE = 50
MEMORY_PAGES = (50, 200, 1000)  # how many memories a store's page shows, then "show more"


class Pages:
    def __init__(self, workspace: Workspace, auth: WebAuth, options: ServerOptions) -> None:
        self.workspace = workspace
        self.auth = auth
        self.options = options
        self.templates = environment()

    # -------------------------------------------------------------- plumbing

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """`handler` run as the request's caller: no usable token is the sign-in page, a
        `KbError` the error page with its status, anything else a logged 500."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                caller = await self.auth.caller(request)
            except TokenNeeded as needed:
                return self.sign_in(request, refused=needed.refused)
            try:
                return await handler(request, caller)
            except KbError as error:
                return self.error(request, caller, error)
            except Exception:
                logger.exception("the page %s failed", request.url.path)
                failure = KbError("the page failed unexpectedly; the server's log says why")
                return self.error(request, caller, failure, status=500)

        return endpoint

    def render(
        self,
        request: Request,
        caller: Caller | None,
        template: str,
        status: int = 200,
        auth_state: str = "ok",
        **context: Any,
    ) -> HTMLResponse:
        """`template` with `context`; `auth_state` (ok, required, refused) tells the page's
        script whether to load the page again with the tab's token or to drop it."""
        html = self.templates.get_template(template).render(
            who=None if caller is None else identity(caller),
            tokens_required=self.auth.tokens_required,
            auth_state=auth_state,
            path=request.url.path,
            version=__version__,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def sign_in(self, request: Request, *, refused: bool) -> HTMLResponse:
        response = self.render(
            request,
            None,
            "sign_in.html",
            status=401,
            auth_state="refused" if refused else "required",
            title="Sign in",
            refused=refused,
            needs_script=False,
        )
        response.headers["WWW-Authenticate"] = (
            'Bearer error="invalid_token"' if refused else "Bearer"
        )
        return response

    def error(
        self, request: Request, caller: Caller, error: KbError, status: int | None = None
    ) -> HTMLResponse:
        return self.render(
            request,
            caller,
            "error.html",
            status=status or STATUS_OF_CODE.get(error.code, 500),
            title="Error",
            error=error,
        )

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A service call (or several) in a worker thread, as the MCP tools run: one request
        of the workspace (made again on a new connection if PostgreSQL dropped this one)."""
        call = functools.partial(function, *args, **kwargs)
        return await anyio.to_thread.run_sync(self.workspace.run_request, call)

    # -------------------------------------------------------------- pages

    async def home(self, request: Request, caller: Caller) -> Response:
        """The knowledge bases and memory stores the caller can read."""
        kbs, stores = await self.run(self._collections, caller, last_updates=True)
        return self.render(request, caller, "home.html", title="Knowledge", kbs=kbs, stores=stores)

    def _collections(
        self, caller: Caller, *, last_updates: bool = False
    ) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
        """The readable knowledge bases and memory stores, each as {"info": ..., "updated_at":
        its last update (with `last_updates`), None when it holds nothing}."""
        ws, principal = self.workspace, caller.principal
        kbs = None
        if caller.may(KNOWLEDGE_READ):
            kbs = [
                {"info": kb, "updated_at": self._kb_updated(caller, kb) if last_updates else None}
                for kb in listing.list_knowledge_bases(ws, principal)
            ]
        stores = None
        if caller.may(MEMORY_READ):
            stores = []
            for info in memories.list_memory_stores(ws, principal):
                newest = []
                if last_updates:
                    newest = memories.list_memories(
                        ws, principal, memory_store=info.memory_store_id, limit=1
                    )
                stores.append(
                    {"info": info, "updated_at": newest[0].updated_at if newest else None}
                )
        return kbs, stores

    def _kb_updated(self, caller: Caller, kb: listing.KnowledgeBaseInfo) -> str | None:
        """When a document of `kb` last changed (added, revised or archived): its most recently
        updated document's time. A knowledge base's own `updated_at` is the time it was created
        (nothing updates it when its documents change), so it cannot say this."""
        newest = listing.list_documents(
            self.workspace,
            caller.principal,
            knowledge_base_ids=[kb.knowledge_base_id],
            include_archived=True,
            limit=1,
        ).documents
        return newest[0].updated_at if newest else None

    async def documents(self, request: Request, caller: Caller) -> Response:
        """A knowledge base's documents: path, title, tags, revisions, status; by path prefix
        and tags, 50 a page."""
        params = request.query_params
        kb_id = request.path_params["kb_id"]
        prefix = forms.text(params, "prefix")
        tags = forms.tags(params)
        archived = params.get("archived") == "1"
        cursor = forms.text(params, "cursor")
        size = forms.whole_number(params, "limit")
        size = DOCUMENT_PAGE if size is None else size

        def gather() -> tuple[listing.KnowledgeBaseInfo, listing.DocumentPage, str | None]:
            kb = self._knowledge_base(caller, kb_id)
            page = listing.list_documents(
                self.workspace,
                caller.principal,
                knowledge_base_ids=[kb.knowledge_base_id],
                path_prefix=prefix,
                tags=tags,
                include_archived=archived,
                cursor=cursor,
                limit=size,
            )
            return kb, page, self._kb_updated(caller, kb)

        kb, page, updated_at = await self.run(gather)
        return self.render(
            request,
            caller,
            "documents.html",
            title=kb.name,
            kb=kb,
            updated_at=updated_at,
            page=page,
            prefix=prefix or "",
            tags=tags,
            tags_param=[f"{key}={value}" for key, value in tags.items()],
            archived=archived,
            cursor=cursor,
            limit=None if size == DOCUMENT_PAGE else size,
        )

    def _knowledge_base(self, caller: Caller, kb_id: str) -> listing.KnowledgeBaseInfo:
        wanted = check_id("knowledge_base", kb_id, argument="knowledge_base_id")
        readable = listing.list_knowledge_bases(self.workspace, caller.principal)
        return readable_one("knowledge base", wanted, {kb.knowledge_base_id: kb for kb in readable})

    async def search(self, request: Request, caller: Caller) -> Response:
        """The search form, and with a query the very search `search_knowledge` runs."""
        kbs, names = await self.run(self._search_choices, caller)
        try:
            form = forms.SearchForm.from_params(request.query_params)
        except InvalidRequest as error:
            return self.render(
                request,
                caller,
                "search.html",
                status=400,
                title="Search",
                form=forms.SearchForm(),
                kbs=kbs,
                names=names,
                response=None,
                problem=error,
            )
        response, problem = None, None
        if form.query is not None:
            try:
                response = await self.run(
                    search,
                    self.workspace,
                    caller.principal,
                    form.request(self.options.search_candidates),
                )
            except (InvalidRequest, ResourceUnavailable) as error:
                problem = error  # shown above the form, with the fields as typed
        return self.render(
            request,
            caller,
            "search.html",
            status=400 if problem is not None else 200,
            title=f"Search: {form.query}" if form.query else "Search",
            form=form,
            kbs=kbs,
            names=names,
            response=response,
            problem=problem,
        )

    def _search_choices(
        self, caller: Caller
    ) -> tuple[list[listing.KnowledgeBaseInfo], dict[str, str]]:
        """The knowledge bases to choose from, and the names of every readable knowledge base
        and memory store by id (results name where they come from)."""
        ws, principal = self.workspace, caller.principal
        kbs = listing.list_knowledge_bases(ws, principal) if caller.may(KNOWLEDGE_READ) else []
        names = {kb.knowledge_base_id: kb.name for kb in kbs}
        if caller.may(MEMORY_READ):
            for store in memories.list_memory_stores(ws, principal):
                names[store.memory_store_id] = store.name
        return kbs, names

    async def reader(self, request: Request, caller: Caller) -> Response:
        """A revision's text in windows, the cited passage marked, its outline and revisions."""
        params = request.query_params
        document_id = request.path_params["document_id"]
        revision_id = forms.text(params, "rev")
        offset = forms.whole_number(params, "offset")
        passage = forms.passage(params)

        def gather() -> tuple[read.DocumentWindow, read.DocumentOutline]:
            window = read.read_document(
                self.workspace,
                caller.principal,
                document_id,
                revision_id=revision_id,
                offset=window_offset(passage, offset),
                limit_chars=WINDOW,
            )
            outline = read.document_outline(
                self.workspace, caller.principal, document_id, revision_id=window.revision_id
            )
            return window, outline

        window, outline = await self.run(gather)
        marked = mark(
            window.content,
            window.content_offset,
            window.line_start,
            passage,
            to_line_start=offset is None,
        )
        return self.render(
            request,
            caller,
            "reader.html",
            title=window.title or window.path,
            window=window,
            outline=outline,
            marked=marked,
            passage=passage,
            window_size=WINDOW,
            is_memory=window.document_id.startswith("mem_"),
        )

    async def memory_store(self, request: Request, caller: Caller) -> Response:
        """A store's memories, newest first, with tags and their decay weight now."""
        params = request.query_params
        store_id = request.path_params["store_id"]
        limit = forms.whole_number(params, "limit")
        limit = MEMORY_PAGES[0] if limit is None else limit
        half_life = forms.real_number(params, "half_life")
        if half_life is None:
            half_life = self.workspace.settings.recency_half_life_days
        if half_life < 0:
            raise InvalidRequest("half_life must be 0 (no decay) or more days")

        def gather() -> tuple[memories.MemoryStoreInfo, list[memories.MemoryInfo]]:
            store = self._memory_store(caller, store_id)
            found = memories.list_memories(
                self.workspace, caller.principal, memory_store=store.memory_store_id, limit=limit
            )
            return store, found

        store, found = await self.run(gather)
        moment = now()
        rows = [
            {"memory": m, "weight": decay_weight(m.updated_at, half_life, moment)} for m in found
        ]
        more = next((size for size in MEMORY_PAGES if size > limit), None)
        return self.render(
            request,
            caller,
            "memories.html",
            title=store.name,
            store=store,
            rows=rows,
            half_life=half_life,
            limit=limit,
            more=more if len(found) >= limit and more is not None else None,
            may_forget=caller.may(MEMORY_WRITE),
            forgotten=forms.text(params, "forgotten"),
            now=moment.isoformat(),
        )

    def _memory_store(self, caller: Caller, store_id: str) -> memories.MemoryStoreInfo:
        wanted = check_id("memory_store", store_id, argument="memory_store_id")
        readable = memories.list_memory_stores(self.workspace, caller.principal)
        return readable_one("memory store", wanted, {s.memory_store_id: s for s in readable})

    async def forget(self, request: Request, caller: Caller) -> Response:
        """GET: the memory and a button to confirm; POST: forget it, as the MCP tool does, then
        back to its store."""
        caller.principal.require(MEMORY_WRITE)
        memory_id = check_id("memory", request.path_params["memory_id"], argument="memory_id")
        if request.method == "POST":
            reason = None if self.auth.tokens_required else cross_site(request)
            if reason is not None:
                raise Forbidden(f"refused to forget: {reason}")
            result = await self.run(memories.forget, self.workspace, caller.principal, memory_id)
            target = f"/memories/{result.memory_store_id}?forgotten={result.memory_id}"
            return RedirectResponse(target, status_code=303)
        window = None
        if caller.may(MEMORY_READ):
            window = await self.run(read.read_document, self.workspace, caller.principal, memory_id)
        return self.render(
            request,
            caller,
            "forget.html",
            title="Forget a memory",
            memory_id=memory_id,
            window=window,
        )

    async def server(self, request: Request, caller: Caller) -> Response:
        """What `kbmcp doctor` says (the local owner), or what a token may know of it."""
        if caller.may(ADMIN):
            from kbmcp.cli.doctor_lines import doctor_lines
            from kbmcp.service.admin import doctor

            report = await self.run(doctor, self.workspace, caller.principal)
            return self.render(
                request,
                caller,
                "server.html",
                title="Server",
                report=report,
                lines=doctor_lines(report),
                own=None,
            )
        kbs, stores = await self.run(self._collections, caller)
        own = {
            "knowledge_bases": None if kbs is None else len(kbs),
            "documents": None if kbs is None else sum(kb["info"].document_count for kb in kbs),
            "chunks": None if kbs is None else sum(kb["info"].chunk_count for kb in kbs),
            "memory_stores": None if stores is None else len(stores),
            "memories": None
            if stores is None
            else sum(store["info"].memory_count for store in stores),
        }
        return self.render(
            request,
            caller,
            "server.html",
            title="Server",
            report=None,
            lines=None,
            own=own,
            backend="PostgreSQL" if self.workspace.settings.is_postgres else "SQLite file",
            model=self.workspace.embedder.fingerprint,
        )

    async def needs_script(self, request: Request) -> Response:
        """The sign-in form posted without its script (which keeps the token in the tab): the
        token is not taken as a form field, which would put it where headers do not go."""
        return self.render(
            request,
            None,
            "sign_in.html",
            status=400,
            auth_state="required",
            title="Sign in",
            refused=False,
            needs_script=True,
        )


def readable_one(noun: str, public_id: str, readable: dict[str, T]) -> T:
    """The item `public_id` among those the caller can read; an unknown one and another
    tenant's (or one outside a token's allow-list) answer alike, in the words the service
    layer uses for documents."""
    found = readable.get(public_id)
    if found is None:
        raise ResourceUnavailable(
            f"{noun} {public_id} does not exist or is not readable",
            details={f"{noun.replace(' ', '_')}_id": public_id},
        )
    return found
