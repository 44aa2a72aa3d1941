"""The MCP output models mirror the service dataclasses field for field: a field added to a
service result must appear in the declared output schema too."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from kbmcp.search import models as search_models
from kbmcp.search.models import Citation
from kbmcp.server import models
from kbmcp.service import listing, read, scan

MIRRORS: list[tuple[type, type[BaseModel]]] = [
    (Citation, models.Citation),
    (search_models.SearchResult, models.SearchResult),
    (search_models.SearchStats, models.SearchStats),
    (search_models.SearchResponse, models.QueryOutput),
    (read.DocumentWindow, models.ReadOutput),
    (read.OutlineSection, models.OutlineSection),
    (read.DocumentOutline, models.OutlineOutput),
    (read.FetchedChunk, models.FetchedChunk),
    (read.FetchedChunks, models.FetchOutput),
    (scan.ScanItem, models.ScanItem),
    (scan.ScanResponse, models.ScanOutput),
    (listing.KnowledgeBaseInfo, models.KnowledgeBase),
    (listing.DocumentInfo, models.DocumentInfo),
    (listing.DocumentPage, models.DocumentPage),
]


@pytest.mark.parametrize(("source", "mirror"), MIRRORS, ids=lambda v: v.__name__)
def test_output_model_mirrors_service_dataclass(source: type, mirror: type[BaseModel]) -> None:
    expected = {field.name for field in dataclasses.fields(source)}
    declared = set(mirror.model_fields) - {"request_mode"}
    assert declared == expected
