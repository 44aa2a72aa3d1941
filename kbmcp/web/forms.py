"""The pages' query parameters as typed values. A value that is not a number where one is
needed, or a tag without `=`, is an `InvalidRequest` naming the field; ranges and ids are left
to the service functions, which check them as they check an MCP call's arguments."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from starlette.datastructures import QueryParams

from kbmcp.errors import InvalidRequest
from kbmcp.search.models import DEFAULT_LIMIT, SearchFilters, SearchRequest
from kbmcp.validate import shown
from kbmcp.web.passage import Passage


def text(params: QueryParams, name: str) -> str | None:
    """A text field; empty (or only spaces) is not given."""
    value = params.get(name)
    return value if value is not None and value.strip() else None


def whole_number(params: QueryParams, name: str) -> int | None:
    value = text(params, name)
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidRequest(
            f"{name} must be a whole number (got {shown(value)})", details={"argument": name}
        ) from None


def real_number(params: QueryParams, name: str) -> float | None:
    value = text(params, name)
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise InvalidRequest(
            f"{name} must be a number (got {shown(value)})", details={"argument": name}
        )
    return number


def tags(params: QueryParams, name: str = "tag") -> dict[str, str]:
    """`tag=key=value` fields (repeatable) as a mapping; empty fields are skipped."""
    pairs: dict[str, str] = {}
    for raw in params.getlist(name):
        if not raw.strip():
            continue
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise InvalidRequest(
                f"{name}: write each tag as key=value (got {shown(raw)})",
                details={"argument": name},
            )
        pairs[key.strip()] = value.strip()
    return pairs


def passage(params: QueryParams) -> Passage | None:
    """The reader's `start` and `end` (a citation's char_start and char_end): both or neither,
    0 <= start < end."""
    start, end = whole_number(params, "start"), whole_number(params, "end")
    if start is None and end is None:
        return None
    if start is None or end is None:
        missing = "start" if start is None else "end"
        raise InvalidRequest(
            f"{missing}: a passage needs start and end (a citation's char_start and char_end)",
            details={"argument": missing},
        )
    if not 0 <= start < end:
        raise InvalidRequest(
            f"end must be greater than start, and start 0 or more (got start {start}, end {end})",
            details={"argument": "end"},
        )
    return Passage(start, end)


def ids(params: QueryParams, name: str) -> list[str]:
    return [value.strip() for value in params.getlist(name) if value.strip()]


@dataclass(frozen=True)
class SearchForm:
    """The search page's fields, as typed in; `request` is the search they stand for."""

    query: str | None = None
    mode: str | None = None
    knowledge_base_ids: list[str] = field(default_factory=list)
    path_prefix: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    min_similarity: float | None = None
    limit: int | None = None

    @classmethod
    def from_params(cls, params: QueryParams) -> SearchForm:
        return cls(
            query=text(params, "q"),
            mode=text(params, "mode"),
            knowledge_base_ids=ids(params, "kb"),
            path_prefix=text(params, "path"),
            tags=tags(params),
            min_similarity=real_number(params, "min_similarity"),
            limit=whole_number(params, "limit"),
        )

    def request(self, candidates: int | None) -> SearchRequest:
        """The request `search_knowledge` builds from the same arguments (kbmcp/server/tools.py:
        query, mode, knowledge_base_ids, document_paths, tags, min_similarity, limit), so the
        page and an agent get the same results in the same order. `candidates`: the server's
        search depth (KBMCP_SEARCH_CANDIDATES), as the tools pass it."""
        assert self.query is not None
        return SearchRequest(
            query=self.query,
            mode=self.mode,
            min_similarity=self.min_similarity,
            limit=DEFAULT_LIMIT if self.limit is None else self.limit,
            filters=SearchFilters(
                knowledge_base_ids=self.knowledge_base_ids or None,
                document_paths=[self.path_prefix] if self.path_prefix else None,
                tags=self.tags or None,
            ),
            candidates=candidates,
        )

    def tool_arguments(self) -> dict[str, object]:
        """The same search as `search_knowledge` arguments (shown on the page for agents' users,
        and what the tests send over MCP)."""
        arguments: dict[str, object] = {"query": self.query}
        if self.mode is not None:
            arguments["mode"] = self.mode
        if self.knowledge_base_ids:
            arguments["knowledge_base_ids"] = self.knowledge_base_ids
        if self.path_prefix:
            arguments["document_paths"] = [self.path_prefix]
        if self.tags:
            arguments["tags"] = self.tags
        if self.min_similarity is not None:
            arguments["min_similarity"] = self.min_similarity
        if self.limit is not None:
            arguments["limit"] = self.limit
        return arguments
