"""Where each file's document lives: the documents of a knowledge base when a run starts, and
the path every file found gets (the add-order rule, docs/ingest.md).

One file, one document, one path: a file's path is relative to the outermost folder it lies in
among the folder this run added and the folders earlier runs added (each known from a
document's source minus its path). So whatever the order of adds, every file ends up under one
path: adding `d/sub` then `d` gives `sub/index.md` and `index.md`, as adding `d` alone would.
When a run adds a folder around one added before, the documents of the inner folder's files are
moved to their new, outer-relative paths before anything else is written, keeping their ids and
revisions (`plan_moves`, `apply_moves`). A move whose new path is held by the document of a
file that stays there is not made (its file keeps its old path, with a warning).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbmcp.ingest.walker import SourceFile
from kbmcp.service.ingest_write import KnownDocument
from kbmcp.store.catalog import DocumentState, KnowledgeBaseRef
from kbmcp.store.ingest import RecordedFile

if TYPE_CHECKING:
    from kbmcp.workspace import Workspace

# A document's path while a set of moves is applied: unique, and no path a file can have (a
# file's path is relative: it never starts with "/"), so moves that swap or chain paths never
# collide. (Not a NUL, which a file name cannot hold either: PostgreSQL text cannot.)
MOVING_PATH = "/\x7fmoving/{document_id}"


@dataclass(frozen=True)
class Move:
    """The document of `source` moves from `old_path` to `source.relative_path`."""

    document_id: int
    old_path: str
    source: SourceFile


class KnownDocuments:
    """The documents of a knowledge base when the run started, by path and by source file, and
    the folders they were added from (source minus path)."""

    def __init__(
        self, rows: list[DocumentState], files: dict[str, RecordedFile] | None = None
    ) -> None:
        self.by_path: dict[str, KnownDocument] = {}
        self.id_by_path: dict[str, int] = {}
        self.files = files or {}  # by path: the file each was last read from
        self.path_of_source: dict[str, str] = {}
        roots: set[Path] = set()
        for row in rows:
            path, source = row.path, row.source
            self.by_path[path] = KnownDocument(
                row.title, row.status, source, row.attributes_hash, row.revision_id,
                row.content_hash,
            )  # fmt: skip
            self.id_by_path[path] = row.id
            if source:
                self.path_of_source.setdefault(source, path)
                root = _added_from(path, source, self.files.get(path))
                if root is not None:
                    roots.add(root)
        # Outermost first: a file inside two added folders is placed relative to the outer one.
        self.roots = sorted(roots, key=lambda root: len(root.parts))

    @classmethod
    def load(cls, workspace: Workspace, kb: KnowledgeBaseRef) -> KnownDocuments:
        store, conn = workspace.store, workspace.conn
        return cls(
            store.catalog.document_states(conn, kb.id), store.ingest.recorded_files(conn, kb.id)
        )

    def get(self, path: str) -> KnownDocument | None:
        return self.by_path.get(path)

    def recorded_file(self, source: SourceFile, key: str) -> RecordedFile | None:
        """The recorded file of `source`'s document, if it is current: the document is
        published, was last written from this very file, and was read with the same key."""
        document = self.by_path.get(source.relative_path)
        recorded = self.files.get(source.relative_path)
        if document is None or recorded is None or recorded.read_key != key:
            return None
        if document.status != "published" or document.source != str(source.path):
            return None
        if document.content_hash is None:
            return None
        return recorded

    def other_file_at(self, source: SourceFile) -> str | None:
        """The file that is already the document at `source`'s path, when it is another file
        that still exists: taking its path would swap one file's document for another's. (A
        file that is gone was moved or renamed: its document follows it.)"""
        previous = self.by_path.get(source.relative_path)
        other = previous.source if previous is not None else None
        if other is None or other == str(source.path) or not os.path.lexists(other):
            return None
        return other

    def place(self, source: SourceFile) -> SourceFile:
        """`source` with the path its document gets. A file found in an added folder: relative
        to the outermost folder that holds it among that one and those of earlier adds. A file
        named directly: its document's path if it has one, else relative to the outermost
        earlier added folder that holds it, else its name."""
        if source.named:
            path = self.path_of_source.get(str(source.path))
            if path is not None:
                return dataclasses.replace(source, relative_path=path)
        for root in self.roots:
            if len(root.parts) >= len(source.root.parts):
                break
            if source.path.is_relative_to(root):
                relative = source.path.relative_to(root).as_posix()
                return dataclasses.replace(source, relative_path=relative, root=root)
        return source

    def plan_moves(
        self, sources: list[SourceFile], warnings: list[str]
    ) -> tuple[list[SourceFile], list[Move]]:
        """The moves of documents whose file (placed) has another path now, and the sources
        with the paths they end up with: a move onto the path of a document that stays (its
        file is not moving away) is not made, and its file keeps its document's old path."""
        wanted: list[Move] = []
        for source in sources:
            if source.named:
                continue
            old = self.path_of_source.get(str(source.path))
            if old is not None and old != source.relative_path and old in self.id_by_path:
                wanted.append(Move(self.id_by_path[old], old, source))
        leaving = {move.old_path for move in wanted}
        blocked = {
            move.source.path: move
            for move in wanted
            if move.source.relative_path in self.by_path
            and move.source.relative_path not in leaving
        }
        for move in blocked.values():
            holder = self.by_path[move.source.relative_path].source
            warnings.append(
                f"{move.source.path}: stays at {move.old_path!r}: its path under the added "
                f"folder, {move.source.relative_path!r}, is the document of {holder}"
            )
        placed = [
            dataclasses.replace(s, relative_path=blocked[s.path].old_path)
            if s.path in blocked
            else s
            for s in sources
        ]
        return placed, [move for move in wanted if move.source.path not in blocked]

    def moved(self, moves: list[Move]) -> None:
        """Take applied moves into account."""
        entries = [
            (move, self.by_path.pop(move.old_path), self.files.pop(move.old_path, None))
            for move in moves
        ]
        for move, document, recorded in entries:
            new = move.source.relative_path
            self.by_path[new] = document
            self.id_by_path.pop(move.old_path, None)
            self.id_by_path[new] = move.document_id
            if recorded is not None:
                self.files[new] = dataclasses.replace(recorded, folder=move.source.folder)
            self.path_of_source[str(move.source.path)] = new


class _MovedMeanwhile(Exception):
    """A document to move no longer has the path the run found it at: nothing is moved."""


def apply_moves(workspace: Workspace, moves: list[Move]) -> bool:
    """Move documents to their new paths in one transaction, through paths no file can have
    first (one move's new path may be another's old one). Ids, revisions, chunks, tags and
    the search indexes are untouched: only the path changes. False (nothing moved) when another
    process changed those paths since the run started: a document moved meanwhile, or a new
    path taken meanwhile (the UNIQUE (knowledge base, path) constraint; on PostgreSQL a
    concurrent move of the same document is waited for and then seen, see
    kbmcp/store/postgres/ingest.py)."""
    store, conn = workspace.store, workspace.conn
    ingest = store.ingest
    try:
        with store.write_transaction(conn):
            for move in moves:
                moving = MOVING_PATH.format(document_id=move.document_id)
                if not ingest.move_document(conn, move.document_id, move.old_path, moving):
                    raise _MovedMeanwhile
            for move in moves:
                moving = MOVING_PATH.format(document_id=move.document_id)
                ingest.move_document(conn, move.document_id, moving, move.source.relative_path)
                ingest.move_source_file(conn, move.document_id, move.source.folder)
    except _MovedMeanwhile:
        return False
    except store.driver_errors as error:
        if store.is_constraint_violation(error):
            return False
        raise
    return True


def _added_from(path: str, source: str, recorded: RecordedFile | None) -> Path | None:
    """The folder a document's file was added from: recorded with the file (None for a file
    named directly); for a document whose folder was not recorded, its source minus its path."""
    if recorded is not None and recorded.folder is not None:
        return Path(recorded.folder) if recorded.folder else None
    suffix = os.sep + path.replace("/", os.sep)
    return Path(source[: -len(suffix)]) if source.endswith(suffix) else None
