"""The MCP output models (the declared `outputSchema`s), built from the service result types.

Each result type has one definition: the service's dataclass, whose fields carry the
agent-facing descriptions (kbmcp/described.py). The SDK reads a tool's schema from a pydantic
model, so `output_model` makes one from a result's own fields; nested results (SearchResult,
Citation, ...) stay dataclasses, which pydantic reads directly. Only what MCP itself needs is
added here: `search_knowledge` returns one of five shapes, told apart by a leading
`request_mode` constant, under an object root; `list_knowledge_bases` wraps its list in an
object. A tool validates its result into its model and dumps that (`ok_result`), so the wire
follows the schema's types.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from kbmcp.search.models import SearchResponse
from kbmcp.service import listing, memories, read, scan


def output_model(name: str, result: type, request_mode: str | None = None) -> type[BaseModel]:
    """A pydantic model named `name` with the fields of the dataclass `result` (annotations and
    descriptions included), led by a `request_mode` constant when one is given. It validates
    a `result` instance directly (`from_attributes`)."""
    hints = get_type_hints(result, include_extras=True)
    fields: dict[str, Any] = {field.name: hints[field.name] for field in dataclasses.fields(result)}
    if request_mode is not None:
        fields = {"request_mode": (Literal[request_mode], request_mode), **fields}
    return create_model(name, __config__=ConfigDict(from_attributes=True), **fields)


QueryOutput = output_model("QueryOutput", SearchResponse, "query")
ReadOutput = output_model("ReadOutput", read.DocumentWindow, "read")
OutlineOutput = output_model("OutlineOutput", read.DocumentOutline, "outline")
FetchOutput = output_model("FetchOutput", read.FetchedChunks, "fetch")
ScanOutput = output_model("ScanOutput", scan.ScanResponse, "scan")

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


# Named as the schema has always named it (the service calls it KnowledgeBaseInfo).
KnowledgeBase = output_model("KnowledgeBase", listing.KnowledgeBaseInfo)


class KnowledgeBaseList(BaseModel):
    knowledge_bases: list[KnowledgeBase]


DocumentPageOutput = output_model("DocumentPage", listing.DocumentPage)

RememberOutput = output_model("RememberOutput", memories.RememberResult)
ForgetOutput = output_model("ForgetOutput", memories.ForgetResult)
MemoryStore = output_model("MemoryStore", memories.MemoryStoreInfo)


class MemoryStoreList(BaseModel):
    memory_stores: list[MemoryStore]
