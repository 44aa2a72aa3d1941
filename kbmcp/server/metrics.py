"""The HTTP server's Prometheus metrics (GET /metrics, docs/operations.md "Monitoring").

Each server has its own registry (prometheus_client's default one is process-wide, and tests
build several servers in one process). What it holds:
- `kbmcp_tool_calls_total{tool, mode, outcome}` and `kbmcp_tool_call_duration_seconds{tool,
  mode}`: every MCP tool call, `mode` being search_knowledge's request mode (query, read,
  outline, fetch, scan; empty for the other tools) and `outcome` `ok` or the error's code;
- `kbmcp_embedding_duration_seconds` and `kbmcp_embedded_texts_total`: time in the model
  (queries, memories);
- `kbmcp_http_refused_requests_total{status}`: requests refused before MCP handling (401);
- read when scraped: `kbmcp_http_sessions` (open MCP sessions), `kbmcp_database_connections`
  (the connections the server holds: one per worker thread that used the database, the
  server's pool), `kbmcp_sqlite_wal_bytes` (an SQLite file's write-ahead log), and per
  knowledge base and memory store `kbmcp_documents`, `kbmcp_memories` and
  `kbmcp_indexed_chunks` (one grouped query, cached COUNTS_TTL_SECONDS: scraping every few
  seconds costs the database nothing).
Tool names outside the registered ones are counted as `unknown`, so a caller cannot grow the
number of series.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from kbmcp.embed.base import DelegatingEmbedder, Embedder

if TYPE_CHECKING:
    import numpy as np

    from kbmcp.store.admin import StoreCounts
    from kbmcp.workspace import Workspace

METRICS_PATH = "/metrics"
CONTENT_TYPE = CONTENT_TYPE_LATEST
COUNTS_TTL_SECONDS = 30.0
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
EMBEDDING_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
UNKNOWN_TOOL = "unknown"


class ServerMetrics:
    def __init__(
        self,
        workspace: Workspace,
        tools: Sequence[str],
    ) -> None:
        self._tools = frozenset(tools)
        # Open MCP sessions, None without HTTP (set by kbmcp/server/observe.py `attach`).
        self.sessions: Callable[[], int | None] = lambda: None
        self.registry = CollectorRegistry()
        self.tool_calls = Counter(
            "kbmcp_tool_calls",
            "MCP tool calls by tool, request mode and outcome (ok or the error code).",
            ["tool", "mode", "outcome"],
            registry=self.registry,
        )
        self.tool_seconds = Histogram(
            "kbmcp_tool_call_duration_seconds",
            "Time to answer an MCP tool call, by tool and request mode.",
            ["tool", "mode"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.embedding_seconds = Histogram(
            "kbmcp_embedding_duration_seconds",
            "Time spent in the embedding model per call (queries, memories).",
            buckets=EMBEDDING_BUCKETS,
            registry=self.registry,
        )
        self.embedded_texts = Counter(
            "kbmcp_embedded_texts", "Texts embedded by the model.", registry=self.registry
        )
        self.refused = Counter(
            "kbmcp_http_refused_requests",
            "HTTP requests refused before MCP handling, by status (401: no usable token).",
            ["status"],
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(workspace, lambda: self.sessions()))
        workspace.wrap_embedder(lambda inner: _TimedEmbedder(inner, self._embedded))

    def tool_label(self, tool: object) -> str:
        return tool if isinstance(tool, str) and tool in self._tools else UNKNOWN_TOOL

    def observe_call(self, tool: str, mode: str, outcome: str, seconds: float) -> None:
        self.tool_calls.labels(tool, mode, outcome).inc()
        self.tool_seconds.labels(tool, mode).observe(seconds)

    def _embedded(self, texts: int, seconds: float) -> None:
        self.embedding_seconds.observe(seconds)
        self.embedded_texts.inc(texts)

    def exposition(self) -> bytes:
        """The text format (reads the database when the cached counts are stale: call it off
        the event loop)."""
        return generate_latest(self.registry)


class _TimedEmbedder(DelegatingEmbedder):
    def __init__(self, inner: Embedder, observe: Callable[[int, float], None]) -> None:
        super().__init__(inner)
        self._observe = observe

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        self._observe(len(texts), time.perf_counter() - started)
        return vectors


class _StoreCollector:
    """Figures read when scraped: sessions, connections, the WAL, and the cached counts."""

    def __init__(self, workspace: Workspace, sessions: Callable[[], int | None]) -> None:
        self._workspace = workspace
        self._sessions = sessions
        self._counts: list[StoreCounts] = []
        self._counted_at = -COUNTS_TTL_SECONDS
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Any]:
        workspace = self._workspace
        sessions = self._sessions()
        if sessions is not None:
            yield _gauge("kbmcp_http_sessions", "Open MCP sessions (streamable HTTP).", sessions)
        backend = workspace.store.kind
        connections = GaugeMetricFamily(
            "kbmcp_database_connections",
            "Database connections the server holds (one per worker thread that used it).",
            labels=["backend"],
        )
        connections.add_metric([backend], workspace.connection_count)
        yield connections
        if backend == "sqlite":
            yield _gauge(
                "kbmcp_sqlite_wal_bytes",
                "Size of the SQLite write-ahead log (-wal file) in bytes.",
                _wal_bytes(workspace.settings.db_path),
            )
        yield from self._store_counts()

    def _store_counts(self) -> Iterator[Any]:
        labels = ["id", "name", "tenant"]
        documents = GaugeMetricFamily(
            "kbmcp_documents", "Published documents per knowledge base.", labels=labels
        )
        memories = GaugeMetricFamily(
            "kbmcp_memories", "Memories (not forgotten) per memory store.", labels=labels
        )
        chunks = GaugeMetricFamily(
            "kbmcp_indexed_chunks",
            "Searchable chunks per knowledge base or memory store.",
            labels=[*labels, "kind"],
        )
        for row in self._counted():
            names = [row.public_id, row.name, row.tenant]
            (documents if row.kind == "documents" else memories).add_metric(names, row.documents)
            chunks.add_metric([*names, row.kind], row.chunks)
        yield from (documents, memories, chunks)

    def _counted(self) -> list[StoreCounts]:
        with self._lock:
            if time.monotonic() - self._counted_at >= COUNTS_TTL_SECONDS:
                workspace = self._workspace
                with workspace.store.read_snapshot(workspace.conn):
                    self._counts = workspace.store.admin.counts_by_store(workspace.conn)
                self._counted_at = time.monotonic()
            return self._counts


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _wal_bytes(db_path: Path) -> int:
    try:
        return (db_path.parent / (db_path.name + "-wal")).stat().st_size
    except OSError:  # no WAL right now (checkpointed and removed, or never written)
        return 0
