"""The JSONL export format, version 1 (docs/export-format.md): one JSON object per line, each
with a `type`. `kbmcp export` writes it (kbmcp/service/export.py), `kbmcp import` checks every
line against these models before it writes anything (kbmcp/service/import_jsonl.py).

Order, which the import relies on and checks: the header; the tenants (with --with-tenants);
each knowledge base or memory store followed by its documents (memories), each document by its
revisions, each revision by the vectors of its chunks (with --with-vectors); the shares (with
--with-tenants); the end line with the counts of every type, so a cut-off file is refused.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

FORMAT = 1
HEADER_TYPE = "kbmcp_export"
TIMESTAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"
ID = r"^{}_[0-9a-f]{{16}}$"

Timestamp = Annotated[str, Field(pattern=TIMESTAMP)]
Count = Annotated[int, Field(ge=0)]


def _id(*prefixes: str) -> Any:
    return Annotated[str, Field(pattern=ID.format(f"({'|'.join(prefixes)})"))]


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Model(Line):
    name: str
    dimension: Annotated[int, Field(ge=1, le=100_000)]
    version: str


class Header(Line):
    type: Literal["kbmcp_export"]
    format: int
    with_vectors: bool
    with_tenants: bool
    model: Model | None = None  # the vectors' model (with_vectors)


class TenantLine(Line):
    type: Literal["tenant"]
    id: _id("ten")
    name: Annotated[str, Field(min_length=1)]
    created_at: Timestamp


class StoreLine(Line):
    type: Literal["knowledge_base", "memory_store"]
    id: _id("kb", "mst")
    tenant: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    description: str
    tags: dict[str, str]
    created_at: Timestamp
    updated_at: Timestamp


class DocumentLine(Line):
    type: Literal["document", "memory"]
    id: _id("doc", "mem")
    store: _id("kb", "mst")
    path: Annotated[str, Field(min_length=1)]
    title: str
    kind: str
    source: str | None
    metadata: dict[str, Any]
    tags: list[tuple[str, str]]
    status: Literal["published", "archived"]
    current_revision: _id("rev")
    attributes_hash: str
    created_at: Timestamp
    updated_at: Timestamp


class ChunkItem(Line):
    id: _id("chk")
    ordinal: Count
    heading_path: list[str]
    char_start: Count
    char_end: Count
    line_start: Count
    line_end: Count
    # Only where it is not the revision's content[char_start:char_end] (never, as kbmcp writes
    # chunks; kept so that any stored text survives the round trip).
    text: str | None = None


class RevisionLine(Line):
    type: Literal["revision"]
    id: _id("rev")
    document: _id("doc", "mem")
    number: Annotated[int, Field(ge=1)]
    content: str
    content_hash: str
    char_count: Count
    line_count: Count
    created_at: Timestamp
    chunks: list[ChunkItem]


class VectorLine(Line):
    type: Literal["vector"]
    chunk: _id("chk")
    embedding: str  # base64 of little-endian float32


class ShareLine(Line):
    type: Literal["share"]
    knowledge_base: _id("kb")
    tenant: Annotated[str, Field(min_length=1)]
    shared_at: Timestamp
    revoked_at: Timestamp | None


class EndLine(Line):
    type: Literal["end"]
    counts: dict[str, Count]


AnyLine = Annotated[
    Header
    | TenantLine
    | StoreLine
    | DocumentLine
    | RevisionLine
    | VectorLine
    | ShareLine
    | EndLine,
    Field(discriminator="type"),
]
LINE = TypeAdapter(AnyLine)
# The types the end line counts, in the order they come.
COUNTED = ("tenant", "knowledge_base", "memory_store", "document", "memory", "revision",
           "vector", "share")  # fmt: skip


class LineError(ValueError):
    """A line that is not valid JSON or not a valid object of the format."""


def parse_line(text: str) -> Line:
    """One line as its model; LineError naming the first problem (a field path)."""
    try:
        return LINE.validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        if first["type"] == "json_invalid":
            raise LineError(f"not valid JSON ({first['msg']})") from None
        if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
            raise LineError(f"type: {first['msg']}") from None
        # The first part of `loc` is the line's type (the union's tag): name the field inside.
        field = where.split(".", 1)[1] if "." in where else where
        raise LineError(f"{field}: {first['msg']}") from None


def dump_line(value: dict[str, Any]) -> str:
    """One object as a line: keys in the given order, no spaces, UTF-8 as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def encode_vector(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")


def decode_vector(text: str, dimension: int) -> bytes:
    """A vector line's bytes; ValueError unless it is base64 of `dimension` float32."""
    try:
        blob = base64.b64decode(text, validate=True)
    except ValueError:
        raise ValueError("embedding: not valid base64") from None
    if len(blob) != 4 * dimension:
        raise ValueError(
            f"embedding: {len(blob) // 4} numbers where the model has {dimension} dimensions"
        )
    return blob
