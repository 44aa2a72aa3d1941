"""A workspace: the open file, the configured embedder and settings, shared by every service call.

The CLI opens one per command; the MCP server opens one for its lifetime.
"""

from __future__ import annotations

import threading

import apsw

from kbmcp.access import Principal, local_principal
from kbmcp.config import Settings
from kbmcp.embed.base import Embedder
from kbmcp.embed.registry import create_embedder
from kbmcp.store.connection import open_connection, write_transaction
from kbmcp.store.vectors import check_model, ensure_binary_index, has_binary_index, record_model


class Workspace:
    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.conn: apsw.Connection = open_connection(settings.db_path)
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        # One apsw connection serves every thread of a server; service calls that span several
        # statements hold this lock so two callers never interleave inside one transaction.
        self.lock = threading.RLock()

    @property
    def embedder(self) -> Embedder:
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = create_embedder(self.settings.embedder)
            return self._embedder

    def local_principal(self) -> Principal:
        return local_principal(self.conn)

    def ensure_model(self) -> None:
        """Check that the file's vectors come from the configured embedder, recording it on first
        use. Raises ModelMismatch (naming `kbmcp reembed`) otherwise."""
        fingerprint = self.embedder.fingerprint
        if check_model(self.conn, fingerprint):
            if not has_binary_index(self.conn):  # a file from before the binary index existed
                with write_transaction(self.conn):
                    ensure_binary_index(self.conn)
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
