"""A workspace: the open file, the configured embedder and settings, shared by every service call.

The CLI opens one per command; the MCP server opens one for its lifetime. `long_lived` says
which: a long-lived workspace holds the search accelerators (kbmcp/search/accelerator.py:
every vector in memory, per-term bm25 contributions, tokenised chunks) that pay off over many
queries; a one-shot one (the default) holds none and answers from SQL alone (vec0, FTS5)
instead of paying a fill of ~0.5-2 s at 100k chunks for a single query (docs/search.md).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import apsw

from kbmcp.access import Principal, local_principal
from kbmcp.config import Settings
from kbmcp.embed.base import Embedder
from kbmcp.embed.registry import create_embedder
from kbmcp.search.accelerator import Accelerator
from kbmcp.store.connection import open_connection, write_transaction
from kbmcp.store.vectors import check_model, record_model


class Workspace:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        create: bool = True,
        long_lived: bool = False,
    ) -> None:
        """Open the file (`create=False`: a missing file is an error instead of a new file).
        `long_lived`: the process serves many queries (server, eval, bench), so search may fill
        in-memory caches; otherwise it uses them only if already warm."""
        self.settings = settings
        self.accelerator: Accelerator | None = None
        self.long_lived = long_lived
        self.conn: apsw.Connection = open_connection(settings.db_path, create=create)
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        # One apsw connection serves every thread of a server; service calls that span several
        # statements hold this lock so two callers never interleave inside one transaction.
        self.lock = threading.RLock()

    @property
    def long_lived(self) -> bool:
        return self.accelerator is not None

    @long_lived.setter
    def long_lived(self, value: bool) -> None:
        if not value:
            self.accelerator = None
        elif self.accelerator is None:
            self.accelerator = Accelerator()

    @property
    def embedder(self) -> Embedder:
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = create_embedder(self.settings.embedder)
            return self._embedder

    def local_principal(self) -> Principal:
        with self.lock:
            return local_principal(self.conn)

    def ensure_model(self) -> None:
        """Check that the file's vectors come from the configured embedder, recording it on first
        use. Raises ModelMismatch (naming `kbmcp reembed`) otherwise."""
        fingerprint = self.embedder.fingerprint
        with self.lock:
            if check_model(self.conn, fingerprint) or self.conn.readonly("main"):
                # A read-only file without a model has no vectors to check (nor room to record).
                return
            with write_transaction(self.conn):
                if not check_model(self.conn, fingerprint):
                    record_model(self.conn, fingerprint)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


P = ParamSpec("P")
R = TypeVar("R")


def holding_lock(
    function: Callable[Concatenate[Workspace, P], R],
) -> Callable[Concatenate[Workspace, P], R]:
    """Run a service function while holding its workspace's lock.

    The rule: a service function that uses the connection holds the lock for exactly that, and
    nothing slow (such as embedding a query) happens while it is held. Adapters (CLI, MCP tools)
    never take it themselves.
    """

    @functools.wraps(function)
    def locked(workspace: Workspace, *args: P.args, **kwargs: P.kwargs) -> R:
        with workspace.lock:
            return function(workspace, *args, **kwargs)

    return locked
