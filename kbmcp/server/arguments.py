"""Tool parameters: their JSON schemas, and the checks that route arguments to a mode.

Every parameter is annotated `Any` at the Python level with an explicit JSON schema for clients:
the SDK then never rejects arguments itself (its own validation errors are plain text without an
error code). Values go to the service layer as they came; it is the single validator, and every
malformed argument becomes an `invalid_request` tool error that names the argument. Every
optional parameter defaults to None, so a tool can tell "not given" from "given"; the documented
default is shown in the schema instead, and a value equal to it counts as not given. A parameter
without a default is `required` in the schema; the server's ToolCallGuard reports it missing
before the SDK would (in plain text).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

from pydantic import Field, WithJsonSchema

from kbmcp.errors import InvalidRequest

_UNSET = object()


@dataclass(frozen=True)
class Declared:
    """The default a parameter declares in its schema (metadata of its `Annotated` type).

    Sending it is the same as leaving the parameter out (`without_declared_defaults`): clients
    and models fill in schema defaults, in every mode, so a declared default is never refused.
    A parameter whose default depends on the other arguments (search_knowledge's `mode`)
    declares none and says what happens in its description instead."""

    default: Any


def param(schema: dict[str, Any], description: str, *, default: Any = _UNSET) -> Any:
    """An `Annotated[Any, ...]` parameter type with a hand-written JSON schema."""

    def extra(field_schema: dict[str, Any]) -> None:
        field_schema.pop("default", None)
        if default is not _UNSET:
            field_schema["default"] = default

    metadata: list[Any] = [
        WithJsonSchema(schema),
        Field(description=description, json_schema_extra=extra),
    ]
    if default is not _UNSET:
        metadata.append(Declared(default))
    return Annotated[(Any, *metadata)]


def declared_defaults(function: Callable[..., Any]) -> dict[str, Any]:
    """The defaults `function`'s parameters declare in their schemas, by parameter name."""
    hints = get_type_hints(function, include_extras=True)
    return {
        name: marker.default
        for name, hint in hints.items()
        for marker in getattr(hint, "__metadata__", ())
        if isinstance(marker, Declared)
    }


def is_declared_default(value: Any, default: Any) -> bool:
    """Whether `value` is `default` as JSON sees it: equal and of the same JSON type, so
    `0.0` is the default `0` but `false` is not (a boolean is no number in a schema)."""
    return isinstance(value, bool) == isinstance(default, bool) and value == default


def without_declared_defaults(
    arguments: dict[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """`arguments` with every argument that equals its declared default set to None (not
    given): a call that spells out a default behaves exactly like the call that omits it, in
    every mode, including the modes the parameter does not apply to."""
    return {
        name: None
        if name in defaults and value is not None and is_declared_default(value, defaults[name])
        else value
        for name, value in arguments.items()
    }


def string_list_schema(
    max_items: int, *, pattern: str | None = None, item_pattern: str | None = None
) -> dict[str, Any]:
    """A list of 1..max_items strings: ids matching `pattern`, or non-empty strings matching
    `item_pattern`."""
    items: dict[str, Any] = {"type": "string"}
    if pattern:
        items["pattern"] = pattern
    else:
        items["minLength"] = 1
        if item_pattern:
            items["pattern"] = item_pattern
    return {"type": "array", "items": items, "minItems": 1, "maxItems": max_items}


# A filter of key/value pairs: an empty one is refused (it would filter nothing).
STRING_MAP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "minProperties": 1,
}


def tag_filter_schema(max_pairs: int, *, min_properties: int) -> dict[str, Any]:
    """A tags filter: key -> a string, or a list of strings that must all be carried (the shape
    results show tags in, kbmcp/tags.py). anyOf, not a type array (strict checkers)."""
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": {
            "anyOf": [
                {"type": "string"},
                {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": max_pairs,
                },
            ]
        },
        "maxProperties": max_pairs,
    }
    if min_properties:
        schema["minProperties"] = min_properties
    return schema


# Pairs where an empty object means "none" (a memory's tags, list_documents' filter).
STRING_MAP_SCHEMA_OR_EMPTY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string"},
}


def _invalid(argument: str, message: str, **details: Any) -> InvalidRequest:
    return InvalidRequest(f"{argument}: {message}", details={"argument": argument, **details})


def as_bool(value: Any, argument: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _invalid(argument, f"expected true or false, got {type(value).__name__}")


def reject_given(arguments: dict[str, Any], names: list[str], reason: str) -> None:
    """Raise `invalid_request` naming the first of `names` that was given (not None)."""
    given = [name for name in names if arguments.get(name) is not None]
    if given:
        raise InvalidRequest(
            f"{', '.join(given)}: {reason}", details={"argument": given[0], "arguments": given}
        )


# Names other knowledge and memory servers (and agents' habits) use for kbmcp's arguments. An
# unknown argument found here is answered with the first of its names that the tool has. Audited
# against the parameter names of common MCP knowledge servers: vector stores (collection_name,
# namespace, n_results, top_k, where, filter), note and document servers (project, project_id,
# folder, file_path, page_size, start_cursor), memory servers (memory, user_id-style stores) and
# RAG services (score_threshold, search_type).
KNOWN_ELSEWHERE: dict[str, tuple[str, ...]] = {
    # how many
    "max_results": ("limit",),
    "top_k": ("limit",),
    "topk": ("limit",),
    "k": ("limit",),
    "n": ("limit",),
    "n_results": ("limit",),
    "num_results": ("limit",),
    "count": ("limit",),
    "size": ("limit",),
    "page_size": ("limit",),
    "per_page": ("limit",),
    # what
    "q": ("query",),
    "search": ("query",),
    "search_query": ("query",),
    "query_text": ("query",),
    "query_texts": ("query",),
    "question": ("query",),
    "prompt": ("query",),
    "text": ("query", "content"),
    "fact": ("content",),
    "memory": ("content",),
    "note": ("content",),
    "observation": ("content",),
    # where: knowledge bases
    "knowledge_base_id": ("knowledge_base_ids",),
    "knowledge_base": ("knowledge_base_ids",),
    "kb": ("knowledge_base_ids",),
    "kb_id": ("knowledge_base_ids",),
    "kb_ids": ("knowledge_base_ids",),
    "project": ("knowledge_base_ids",),
    "project_id": ("knowledge_base_ids",),
    "project_ids": ("knowledge_base_ids",),
    "collection": ("knowledge_base_ids",),
    "collection_id": ("knowledge_base_ids",),
    "collection_ids": ("knowledge_base_ids",),
    "collection_name": ("knowledge_base_ids",),
    "index": ("knowledge_base_ids",),
    "index_name": ("knowledge_base_ids",),
    "namespace": ("knowledge_base_ids", "memory_store_ids", "memory_store_id"),
    "space": ("knowledge_base_ids",),
    "space_key": ("knowledge_base_ids",),
    "workspace": ("knowledge_base_ids",),
    "partition": ("knowledge_base_ids",),
    # where: documents and folders
    "knowledge_item_id": ("document_id",),
    "knowledge_item_ids": ("document_ids",),
    "doc_id": ("document_id", "document_ids"),
    "doc_ids": ("document_ids",),
    "file_id": ("document_id", "document_ids"),
    "file_ids": ("document_ids",),
    "source_id": ("document_id", "document_ids"),
    "source_ids": ("document_ids",),
    "ids": ("chunk_ids", "document_ids"),
    "identifier": ("document_id",),
    "uri": ("document_id",),
    "url": ("document_id",),
    "path": ("path_prefix", "document_paths"),
    "paths": ("document_paths",),
    "file_path": ("path_prefix", "document_paths"),
    "filepath": ("path_prefix", "document_paths"),
    "folder": ("path_prefix", "document_paths"),
    "directory": ("path_prefix", "document_paths"),
    "prefix": ("path_prefix", "document_paths"),
    # which version, which part
    "knowledge_revision_id": ("revision_id",),
    "version": ("revision_id",),
    "version_id": ("revision_id",),
    "vector_ids": ("chunk_ids",),
    "passage_ids": ("chunk_ids",),
    "start": ("offset",),
    "start_index": ("offset",),
    "max_chars": ("limit_chars",),
    "max_length": ("limit_chars",),
    "length": ("limit_chars",),
    "toc": ("outline",),
    "with_content": ("include_content",),
    "include_text": ("include_content",),
    "return_content": ("include_content",),
    # how
    "search_type": ("mode",),
    "search_mode": ("mode",),
    "retrieval_mode": ("mode",),
    "query_type": ("mode",),
    "score_threshold": ("min_similarity",),
    "similarity_threshold": ("min_similarity",),
    "threshold": ("min_similarity",),
    "min_score": ("min_similarity",),
    "hybrid_alpha": ("alpha",),
    # filters
    "filter": ("tags", "metadata"),
    "filters": ("tags", "metadata"),
    "where": ("metadata", "tags"),
    "labels": ("tags",),
    "tag": ("tags",),
    "after": ("since",),
    "after_date": ("since",),
    "from": ("since",),
    "before": ("until",),
    "to": ("until",),
    "order_by": ("sort",),
    "sort_by": ("sort",),
    "order": ("sort",),
    # paging
    "page": ("cursor",),
    "page_token": ("cursor",),
    "start_cursor": ("cursor",),
    "next_cursor": ("cursor",),
    # memories
    "memory_store_id": ("memory_store_ids", "memory_store_id"),
    "store": ("memory_store_id", "memory_store_ids"),
    "store_id": ("memory_store_id", "memory_store_ids"),
    "memory_store": ("memory_store_id", "memory_store_ids"),
}
# How close a misspelling must be to a known name to be suggested (difflib's ratio).
TYPO_CUTOFF = 0.75


def suggestion(name: str, known: set[str]) -> str | None:
    """The argument `name` probably means among `known` (the tool's own), or None."""
    for candidate in (*KNOWN_ELSEWHERE.get(name, ()), f"{name}s", name.removesuffix("s")):
        if candidate in known and candidate != name:
            return candidate
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=TYPO_CUTOFF)
    return close[0] if close else None
