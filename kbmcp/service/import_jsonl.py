"""`kbmcp import FILE`: load a JSONL export (kbmcp/service/jsonl_format.py) into a database.

Three passes over the file, so nothing is written unless everything can be:
1. check: every line against the format, the order, the references between lines (a document
   of a store in the file, a current revision among the document's revisions, chunk ranges
   inside their revision's text, vectors of the model's dimension), the counts of the end line
   (a cut-off file is refused), and the target: a store name a tenant already uses, and, with
   ids kept, an id the target already holds (`--new-ids` makes new ones instead). The first
   problem stops the import, naming its line; nothing has been written.
2. embed: the chunks of each document's current revision that need a vector and have none in
   the file that matches the target's model are embedded (outside any transaction), their
   vectors spooled to a temporary file in file order. Vectors in the file from the same model
   are used as they are: nothing is embedded twice.
3. write: one transaction, so the import lands whole or not at all. Ids are kept, or derived
   from the target's id key as kbmcp derives them (`--new-ids`: the ids a fresh ingest of the
   same names would get); times are kept.
The file is read a document at a time in every pass: memory holds one document's revisions,
not the file. Tenants are matched by name: a store of a tenant the target lacks creates it.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kbmcp.access import ADMIN, Principal
from kbmcp.embed.inputs import chunk_embedding_input
from kbmcp.errors import InvalidRequest
from kbmcp.service.jsonl_format import (
    COUNTED,
    FORMAT,
    DocumentLine,
    EndLine,
    Header,
    Line,
    LineError,
    RevisionLine,
    ShareLine,
    StoreLine,
    TenantLine,
    VectorLine,
    decode_vector,
    parse_line,
)
from kbmcp.store.catalog import (
    ID_KIND,
    DocumentAttributes,
    NewChunk,
    NewDocument,
    NewRevision,
    dump_json,
)
from kbmcp.store.index import IndexRow
from kbmcp.store.transfer import StoreRow
from kbmcp.workspace import Workspace

EMBED_BATCH = 32
ID_BATCH = 500
PROGRESS_SECONDS = 2.0
STORE_KIND = {"knowledge_base": "documents", "memory_store": "memories"}
DOCUMENT_OF = {"documents": "document", "memories": "memory"}
ID_TABLE = {"knowledge_base": "knowledge_base", "memory_store": "knowledge_base",
            "document": "document", "memory": "document", "revision": "revision"}  # fmt: skip

Progress = Callable[[str], None]


@dataclass
class ImportReport:
    counts: Counter[str] = field(default_factory=Counter)
    stores: list[str] = field(default_factory=list)  # public ids, in the target
    embedded: int = 0  # chunks embedded here
    vectors_used: int = 0  # chunks whose vector came from the file
    seconds: float = 0.0


@dataclass
class _Revision:
    line: RevisionLine
    number: int  # its line's number in the file
    vectors: dict[str, str] = field(default_factory=dict)  # chunk id -> base64


@dataclass
class _Document:
    line: DocumentLine
    number: int
    revisions: list[_Revision] = field(default_factory=list)

    @property
    def current(self) -> _Revision | None:
        return next((r for r in self.revisions if r.line.id == self.line.current_revision), None)


def _fail(number: int, message: str) -> InvalidRequest:
    return InvalidRequest(
        f"line {number}: {message}; nothing was imported", details={"line": number}
    )


def _units(path: Path) -> Iterator[tuple[int, Line | _Document]]:
    """The file's lines as models, a document with its revisions and their vectors as one
    unit (line number of its first line). LineError problems become `_fail`."""
    held: _Document | None = None
    with path.open("r", encoding="utf-8", newline="\n") as lines:
        number = 0
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                raise _fail(number, "an empty line (the format has one object per line)")
            try:
                line = parse_line(text)
            except LineError as error:
                raise _fail(number, str(error)) from None
            if isinstance(line, RevisionLine | VectorLine):
                if held is None:
                    raise _fail(number, f"a {line.type} line must follow its document")
                if isinstance(line, RevisionLine):
                    held.revisions.append(_Revision(line, number))
                elif not held.revisions:
                    raise _fail(number, "a vector line must follow its revision")
                elif line.chunk in held.revisions[-1].vectors:
                    raise _fail(number, f"a second vector for {line.chunk}")
                else:
                    held.revisions[-1].vectors[line.chunk] = line.embedding
                continue
            if held is not None:
                yield held.number, held
                held = None
            if isinstance(line, DocumentLine):
                held = _Document(line, number)
            else:
                yield number, line
        if held is not None:
            yield held.number, held
    if number == 0:
        raise _fail(1, "the file is empty")


def _text(revision: RevisionLine, index: int) -> str:
    chunk = revision.chunks[index]
    if chunk.text is not None:
        return chunk.text
    return revision.content[chunk.char_start : chunk.char_end]


class _Check:
    """Pass 1 (see the module docstring). Keeps what later passes need: the header and how
    many chunks need embedding."""

    def __init__(self, workspace: Workspace, new_ids: bool) -> None:
        self.workspace = workspace
        self.new_ids = new_ids
        self.header: Header | None = None
        self.counts: Counter[str] = Counter()
        self.tenants: set[str] = set()  # names in the file
        self.stores: dict[str, str] = {}  # public id -> kind (documents | memories)
        self.documents: set[str] = set()
        self.revisions: set[str] = set()
        self.ended = False
        self.store: StoreLine | None = None
        self.to_embed = 0
        self.vectors_usable = False
        self._ids: dict[str, list[tuple[str, int]]] = {}  # table -> (id, line), to look up

    def run(self, path: Path) -> None:
        number = 0
        for number, unit in _units(path):
            if self.ended:
                raise _fail(number, "a line after the end line")
            if self.header is None and not isinstance(unit, Header):
                raise _fail(number, "the file must start with the kbmcp_export header line")
            if isinstance(unit, Header):
                self._header(number, unit)
            elif isinstance(unit, TenantLine):
                self._tenant(number, unit)
            elif isinstance(unit, StoreLine):
                self._store(number, unit)
            elif isinstance(unit, _Document):
                self._document(unit)
            elif isinstance(unit, ShareLine):
                self._share(number, unit)
            elif isinstance(unit, EndLine):
                self._end(number, unit)
        if not self.ended:  # (named by the file's last line, not its last document's first)
            with path.open("rb") as lines:
                last = sum(1 for _ in lines)
            raise _fail(last, "the file ends without its end line (cut off?): export it again")
        self._look_up_ids()

    def _header(self, number: int, header: Header) -> None:
        if self.header is not None:
            raise _fail(number, "a second header line")
        if header.format != FORMAT:
            raise _fail(
                number,
                f"format {header.format}: this kbmcp reads format {FORMAT}"
                + (" (upgrade kbmcp)" if header.format > FORMAT else ""),
            )
        self.header = header
        fingerprint = self.workspace.embedder.fingerprint
        self.vectors_usable = header.model is not None and (
            (header.model.name, header.model.dimension, header.model.version)
            == (fingerprint.name, fingerprint.dimension, fingerprint.version)
        )

    def _tenant(self, number: int, tenant: TenantLine) -> None:
        if self.stores or self.counts["share"]:
            raise _fail(number, "tenant lines come before the knowledge bases")
        if tenant.name in self.tenants:
            raise _fail(number, f"tenant {tenant.name!r} appears twice")
        self.tenants.add(tenant.name)
        self.counts["tenant"] += 1
        store, conn = self.workspace.store, self.workspace.conn
        if store.catalog.find_tenant(conn, tenant.name) is None and not self.new_ids:
            self._remember("tenant", tenant.id, number)

    def _store(self, number: int, line: StoreLine) -> None:
        if self.counts["share"]:
            raise _fail(number, "knowledge bases come before the shares")
        prefix = "kb_" if line.type == "knowledge_base" else "mst_"
        if not line.id.startswith(prefix):
            raise _fail(number, f"id: a {line.type} id starts with {prefix}")
        if line.id in self.stores:
            raise _fail(number, f"id: {line.id} appears twice")
        store, conn = self.workspace.store, self.workspace.conn
        if store.transfer.store_exists(conn, line.tenant, line.name):
            raise _fail(
                number,
                f"tenant {line.tenant!r} already has a knowledge base or memory store named "
                f"{line.name!r} in {store.shown}: import into another database, or rename or "
                "remove that one first",
            )
        self.stores[line.id] = STORE_KIND[line.type]
        self.store = line
        self.counts[line.type] += 1
        if not self.new_ids:
            self._remember(line.type, line.id, number)

    def _document(self, unit: _Document) -> None:
        line, number = unit.line, unit.number
        if self.store is None or line.store != self.store.id:
            raise _fail(number, f"store: a {line.type} follows the store it belongs to")
        kind = self.stores[line.store]
        if line.type != DOCUMENT_OF[kind]:
            raise _fail(number, f"type: a {self.store.type} holds {DOCUMENT_OF[kind]} lines")
        if not line.id.startswith("mem_" if kind == "memories" else "doc_"):
            raise _fail(number, f"id: {line.id} is not a {line.type} id")
        if kind == "memories" and line.path != line.id:
            raise _fail(number, "path: a memory's path is its id")
        if line.id in self.documents:
            raise _fail(number, f"id: {line.id} appears twice")
        self.documents.add(line.id)
        self.counts[line.type] += 1
        if not self.new_ids:
            self._remember(line.type, line.id, number)
        last = 0
        for revision in unit.revisions:
            self._revision(unit, revision, last)
            last = revision.line.number
        current = unit.current
        if current is None:
            raise _fail(number, f"current_revision: {line.current_revision} is not among the "
                        "revision lines that follow the document")  # fmt: skip
        for revision in unit.revisions:
            if revision is not current and revision.vectors:
                raise _fail(revision.number, "vectors belong to the current revision only")
        self._vectors(current)

    def _revision(self, unit: _Document, revision: _Revision, last: int) -> None:
        line, number = revision.line, revision.number
        if line.document != unit.line.id:
            raise _fail(number, f"document: {line.document} is not the document above")
        if line.number <= last:
            raise _fail(number, "number: revisions come in increasing number order")
        if line.id in self.revisions:
            raise _fail(number, f"id: {line.id} appears twice")
        self.revisions.add(line.id)
        self.counts["revision"] += 1
        if not self.new_ids:
            self._remember("revision", line.id, number)
        seen: set[str] = set()
        size = len(line.content)
        for index, chunk in enumerate(line.chunks):
            where = f"chunks.{index}"
            if chunk.ordinal != index:
                raise _fail(number, f"{where}.ordinal: chunks come in ordinal order from 0")
            if chunk.id in seen:
                raise _fail(number, f"{where}.id: {chunk.id} appears twice")
            seen.add(chunk.id)
            if not chunk.char_start <= chunk.char_end <= size:
                raise _fail(number, f"{where}: chars {chunk.char_start}..{chunk.char_end} lie "
                            f"outside the revision's {size} characters")  # fmt: skip
            if not 1 <= chunk.line_start <= chunk.line_end:
                raise _fail(number, f"{where}: lines {chunk.line_start}..{chunk.line_end}")
            if not self.new_ids:
                self._remember("chunk", chunk.id, number)

    def _vectors(self, current: _Revision) -> None:
        chunk_ids = {chunk.id for chunk in current.line.chunks}
        header = self.header
        assert header is not None
        for chunk_id, encoded in current.vectors.items():
            if header.model is None:
                raise _fail(current.number, "vector lines in an export without a model")
            if chunk_id not in chunk_ids:
                raise _fail(current.number, f"a vector for {chunk_id}, not a chunk of the "
                            "revision above it")  # fmt: skip
            try:
                decode_vector(encoded, header.model.dimension)
            except ValueError as error:
                raise _fail(current.number, f"the vector of {chunk_id}: {error}") from None
        self.counts["vector"] += len(current.vectors)
        usable = current.vectors if self.vectors_usable else {}
        self.to_embed += sum(1 for chunk_id in chunk_ids if chunk_id not in usable)

    def _share(self, number: int, line: ShareLine) -> None:
        if self.stores.get(line.knowledge_base) != "documents":
            raise _fail(number, f"knowledge_base: {line.knowledge_base} is not a knowledge "
                        "base of this file")  # fmt: skip
        store, conn = self.workspace.store, self.workspace.conn
        if line.tenant not in self.tenants and store.catalog.find_tenant(conn, line.tenant) is None:
            raise _fail(number, f"tenant: {line.tenant!r} is neither in the file nor in the "
                        "target")  # fmt: skip
        self.counts["share"] += 1

    def _end(self, number: int, line: EndLine) -> None:
        wanted = {kind: line.counts.get(kind, 0) for kind in COUNTED}
        found = {kind: self.counts[kind] for kind in COUNTED}
        if wanted != found:
            differ = ", ".join(
                f"{kind} {found[kind]} (end line: {wanted[kind]})"
                for kind in COUNTED
                if wanted[kind] != found[kind]
            )
            raise _fail(number, f"the counts differ from the lines read: {differ}")
        self.ended = True

    def _remember(self, kind: str, public_id: str, number: int) -> None:
        table = ID_TABLE.get(kind, kind)
        held = self._ids.setdefault(table, [])
        held.append((public_id, number))
        if len(held) >= ID_BATCH:
            self._look_up(table)

    def _look_up_ids(self) -> None:
        for table in list(self._ids):
            self._look_up(table)

    def _look_up(self, table: str) -> None:
        held, self._ids[table] = self._ids[table], []
        store, conn = self.workspace.store, self.workspace.conn
        taken = store.transfer.taken_ids(conn, table, [public_id for public_id, _ in held])
        for public_id, number in held:
            if public_id in taken:
                raise _fail(number, f"{public_id} already exists in {store.shown}: pass "
                            "--new-ids to import with new ids")  # fmt: skip


class _Ids:
    """The public ids rows get in the target: kept, or derived from the target's id key."""

    def __init__(self, workspace: Workspace, new_ids: bool) -> None:
        self._new = new_ids
        self._key = workspace.store.id_key.id_key_of(workspace.conn) if new_ids else None
        self.stores: dict[str, tuple[int, str]] = {}  # file id -> (row id, target id)

    def make(self, kept: str, kind: str, *parts: object) -> str:
        return kept if self._key is None else self._key.make(kind, *parts)


def import_jsonl(
    workspace: Workspace,
    principal: Principal,
    path: Path,
    *,
    new_ids: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import the export at `path` (see the module docstring). The local operator's (ADMIN)."""
    principal.require(ADMIN)
    say = progress or (lambda _line: None)
    started = time.perf_counter()
    store, conn = workspace.store, workspace.conn
    store.ensure_writable(conn)
    workspace.ensure_model()
    say(f"checking {path}")
    check = _Check(workspace, new_ids)
    check.run(path)
    report = ImportReport(counts=check.counts)
    with tempfile.TemporaryFile() as spool:
        report.embedded = _embed(workspace, path, check, spool, say)
        spool.seek(0)
        say("writing")
        with workspace.lock, store.write_transaction(conn):
            store.vectors.hold_model(conn, workspace.embedder.fingerprint)
            _write(workspace, path, check, spool, report, new_ids, say)
    report.seconds = time.perf_counter() - started
    return report


def _needing_vectors(unit: _Document, usable: bool) -> list[int]:
    """Indexes of the current revision's chunks without a usable vector in the file."""
    current = unit.current
    assert current is not None
    have = current.vectors if usable else {}
    return [i for i, chunk in enumerate(current.line.chunks) if chunk.id not in have]


def _embed(workspace: Workspace, path: Path, check: _Check, spool: IO[bytes], say: Progress) -> int:
    """Pass 2: the vectors to make, in file order, into `spool`; how many."""
    if check.to_embed == 0:
        return 0
    from kbmcp.store.vectors import to_blob

    embedder = workspace.embedder
    batch: list[str] = []
    done = 0
    shown = time.perf_counter()

    def flush() -> None:
        nonlocal done, shown
        if batch:
            for vector in embedder.embed(batch):
                spool.write(to_blob(vector))
            done += len(batch)
            batch.clear()
        if time.perf_counter() - shown >= PROGRESS_SECONDS:
            shown = time.perf_counter()
            say(f"embedding: {done} of {check.to_embed} chunks")

    for _number, unit in _units(path):
        if not isinstance(unit, _Document):
            continue
        current = unit.current
        assert current is not None
        for index in _needing_vectors(unit, check.vectors_usable):
            chunk = current.line.chunks[index]
            batch.append(
                chunk_embedding_input(
                    unit.line.title, chunk.heading_path, _text(current.line, index)
                )
            )
            if len(batch) >= EMBED_BATCH:
                flush()
    flush()
    say(f"embedded {done} chunks")
    return done


def _write(
    workspace: Workspace,
    path: Path,
    check: _Check,
    spool: IO[bytes],
    report: ImportReport,
    new_ids: bool,
    say: Progress,
) -> None:
    """Pass 3, inside the import's one transaction."""
    store, conn = workspace.store, workspace.conn
    ids = _Ids(workspace, new_ids)
    dimension = workspace.embedder.fingerprint.dimension
    tenants: dict[str, TenantLine] = {}
    written = 0
    shown = time.perf_counter()
    for _number, unit in _units(path):
        if isinstance(unit, TenantLine):
            tenants[unit.name] = unit
        elif isinstance(unit, StoreLine):
            tenant = _tenant(workspace, ids, unit.tenant, tenants.get(unit.tenant))
            kind = STORE_KIND[unit.type]
            public_id = ids.make(unit.id, ID_KIND[kind], tenant[1], unit.name)
            row = StoreRow(0, public_id, unit.tenant, unit.name, unit.description, unit.tags,
                           kind, unit.created_at, unit.updated_at)  # fmt: skip
            ids.stores[unit.id] = (store.transfer.insert_store(conn, row, tenant[0], public_id),
                                   public_id)  # fmt: skip
            report.stores.append(public_id)
        elif isinstance(unit, _Document):
            report.vectors_used += _write_document(workspace, ids, unit, check, spool, dimension)
            written += 1
            if time.perf_counter() - shown >= PROGRESS_SECONDS:
                shown = time.perf_counter()
                say(f"writing: {written} of {check.counts['document'] + check.counts['memory']} "
                    "documents")  # fmt: skip
        elif isinstance(unit, ShareLine):
            kb_id = ids.stores[unit.knowledge_base][0]
            grantee = _tenant(workspace, ids, unit.tenant, tenants.get(unit.tenant))[0]
            store.grants.share(conn, kb_id, grantee, unit.shared_at)
            if unit.revoked_at is not None:
                store.grants.revoke_share(conn, kb_id, grantee, unit.revoked_at)


def _tenant(workspace: Workspace, ids: _Ids, name: str, line: TenantLine | None) -> tuple[int, str]:
    """(row id, public id) of the tenant named `name` in the target, made if missing: with its
    line's id and time when the file has one."""
    store, conn = workspace.store, workspace.conn
    found = store.catalog.find_tenant(conn, name)
    if found is not None:
        return found.id, found.public_id
    if line is None:
        made = store.catalog.ensure_tenant(conn, name)
        return made.id, made.public_id
    public_id = ids.make(line.id, "tenant", name)
    return store.transfer.insert_tenant(conn, public_id, name, line.created_at), public_id


def _write_document(
    workspace: Workspace,
    ids: _Ids,
    unit: _Document,
    check: _Check,
    spool: IO[bytes],
    dimension: int,
) -> int:
    """One document with its revisions, chunks, vectors and index rows; the vectors the file
    gave."""
    store, conn = workspace.store, workspace.conn
    catalog = store.catalog
    line = unit.line
    kb_id, kb_public_id = ids.stores[line.store]
    if line.type == "memory":
        public_id = ids.make(line.id, "memory", kb_public_id, line.id)
        path = public_id  # a memory's path is its id
    else:
        public_id = ids.make(line.id, "document", kb_public_id, line.path)
        path = line.path
    metadata = dump_json(line.metadata)
    document_id = catalog.insert_document(
        conn,
        NewDocument(public_id, kb_id, path, line.title, line.kind, line.source, metadata),
        line.created_at,
    )
    assert document_id is not None
    catalog.replace_tags(conn, document_id, line.tags)
    current_row = 0
    current_chunks: list[int] = []
    for revision in unit.revisions:
        rev = revision.line
        rev_public = ids.make(rev.id, "revision", public_id, rev.number)
        rev_row = catalog.insert_revision(
            conn,
            NewRevision(rev_public, document_id, rev.number, rev.content, rev.content_hash,
                        rev.char_count, rev.line_count),
            rev.created_at,
        )  # fmt: skip
        chunk_rows = catalog.insert_chunks(
            conn,
            rev_row,
            [
                NewChunk(
                    public_id=ids.make(chunk.id, "chunk", rev_public, chunk.ordinal),
                    ordinal=chunk.ordinal,
                    heading_path=dump_json(list(chunk.heading_path)),
                    char_start=chunk.char_start,
                    char_end=chunk.char_end,
                    line_start=chunk.line_start,
                    line_end=chunk.line_end,
                    text=_text(rev, index),
                )
                for index, chunk in enumerate(rev.chunks)
            ],
        )
        if rev.id == line.current_revision:
            current_row, current_chunks = rev_row, chunk_rows
    current = unit.current
    assert current is not None
    needing = set(_needing_vectors(unit, check.vectors_usable))
    vectors: list[bytes] = []
    for index, chunk in enumerate(current.line.chunks):
        if index in needing:
            vectors.append(spool.read(4 * dimension))
        else:
            vectors.append(decode_vector(current.vectors[chunk.id], dimension))
    store.vectors.store_vectors(conn, list(zip(current_chunks, vectors, strict=True)))
    catalog.update_document(
        conn,
        document_id,
        DocumentAttributes(line.title, line.kind, line.source, metadata, current_row,
                           line.attributes_hash),
        line.updated_at,
    )  # fmt: skip
    if line.status == "archived":
        catalog.archive_document(conn, document_id, line.updated_at)
    else:
        rows = [
            IndexRow(chunk_row, chunk.heading_path, _text(current.line, index), vector)
            for index, (chunk_row, chunk, vector) in enumerate(
                zip(current_chunks, current.line.chunks, vectors, strict=True)
            )
        ]
        store.index.add_to_index(conn, kb_id, line.title, rows)
    return len(current.line.chunks) - len(needing)
