"""`kbmcp copy SRC DST`: every row of a knowledge base from one store to another, ids unchanged.

SRC and DST are each a SQLite file or a PostgreSQL URL (kbmcp/store/postgres/url.py). What is
copied: tenants, knowledge bases and memory stores, documents with every revision, their tags
and chunks, the vectors (as stored: nothing is re-embedded), shares, tokens (their hashes: the
secrets were never stored), the id key, the model record and the audit trail. What is rebuilt
instead of copied: whatever the destination derives from those rows - the keyword and vector
indexes of the indexed chunks (on SQLite exactly as ingest writes them:
kbmcp/store/sqlite/index.py), document_metadata and index_log (their triggers).

Into PostgreSQL the load is a bulk one (kbmcp/store/postgres/bulk.py: COPY, the postings'
indexes built after the load, ANALYZE before the commit, VACUUM after it): 100k chunks in
minutes, not half an hour. Progress is reported per step in rows, with the time left at the
step's rate so far.

The destination is written in ONE transaction: it ends as a whole copy or as it was. A
destination that holds any knowledge-base data is refused unless `force`, which empties it first
(in the same transaction). At the end every table's rows are counted on both sides, and the
indexes against the indexed chunks; a difference is an error and nothing is committed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbmcp.embed.base import ModelFingerprint
from kbmcp.errors import InvalidRequest, StoreError
from kbmcp.store.admin import count_rows
from kbmcp.store.postgres.url import is_postgres_url, shown_url

# Every table copied, in an order that satisfies the foreign keys (document -> revision is the
# one cycle: deferred on both backends), with every column. tests/test_copy.py checks that
# these are all the columns of both schemas, so a migration that adds one fails there first.
_TABLE_COLUMNS = (
    ("tenant", "id public_id name created_at"),
    ("knowledge_base", "id public_id tenant_id name description tags created_at updated_at kind"),
    (
        "document",
        "id public_id knowledge_base_id path title kind source metadata status "
        "current_revision_id attributes_hash created_at updated_at",
    ),
    (
        "revision",
        "id public_id document_id number content content_hash char_count line_count created_at "
        "knowledge_base_id",
    ),
    (
        "chunk",
        "id public_id revision_id ordinal heading_path char_start char_end line_start line_end "
        "text knowledge_base_id",
    ),
    ("document_tag", "document_id key value knowledge_base_id"),
    (
        "source_file",
        "document_id size mtime_ns inode bytes_hash read_key folder checked_ns knowledge_base_id",
    ),
    ("staged_revision", "revision_id document_id chunking updated_at knowledge_base_id"),
    ("share", "knowledge_base_id tenant_id shared_at revoked_at"),
    (
        "token",
        "id public_id tenant_id name secret_hash scopes knowledge_base_ids created_at "
        "expires_at revoked_at",
    ),
    ("id_key", "id key origin unkeyed_before created_at"),
    ("embedding_model", "id name dimension version recorded_at"),
    ("chunk_vector", "chunk_id embedding knowledge_base_id"),
    ("audit_event", "id tenant_id at token_id via action outcome objects detail count"),
)
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (table, tuple(columns.split())) for table, columns in _TABLE_COLUMNS
)
# The store of each row of these tables: a column on PostgreSQL (its migration 9: the key Citus
# distributes by), found through the row's document in a file, which has no such column (read
# from a file by these expressions, left out when writing one).
FILE_ROW_STORE = {
    "revision": "(SELECT d.knowledge_base_id FROM document AS d WHERE d.id = revision.document_id)",
    "chunk": """(SELECT d.knowledge_base_id FROM revision AS r JOIN document AS d
                 ON d.id = r.document_id WHERE r.id = chunk.revision_id)""",
    "chunk_vector": """(SELECT d.knowledge_base_id FROM chunk AS c JOIN revision AS r
                        ON r.id = c.revision_id JOIN document AS d ON d.id = r.document_id
                        WHERE c.id = chunk_vector.chunk_id)""",
    "source_file": """(SELECT d.knowledge_base_id FROM document AS d
                       WHERE d.id = source_file.document_id)""",
    "staged_revision": """(SELECT d.knowledge_base_id FROM document AS d
                           WHERE d.id = staged_revision.document_id)""",
}
STORE_COLUMN = "knowledge_base_id"
# Rows a destination derives from the copied ones (not copied; counted after the copy).
DERIVED = ("document_metadata",)
# Columns only PostgreSQL has, kept by its triggers from the copied rows (not copied):
# each revision's chunk range (sql/008_revision_chunk_range.sql), set as its chunks go in,
# and its document's copy of its current revision's (sql/010_document_chunk_range.sql).
POSTGRES_DERIVED_COLUMNS = {
    "revision": ("first_chunk_id", "last_chunk_id", "chunk_count"),
    "document": ("current_first_chunk_id", "current_last_chunk_id", "current_chunk_count"),
}
# Tables whose rows make a destination "not empty" (a fresh one holds an id key only).
DATA_TABLES = ("tenant", "knowledge_base", "document", "token")
BATCH = 1000
# The order rows are read in (the key of tables without an `id`).
ORDER = {"document_tag": "document_id, key, value", "share": "knowledge_base_id, tenant_id",
         "chunk_vector": "chunk_id", "source_file": "document_id",
         "staged_revision": "revision_id"}  # fmt: skip

Progress = Callable[[str], None]


@dataclass
class CopyReport:
    source: str
    destination: str
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows copied
    indexed_chunks: int = 0
    # What DST holds, counted as `kbmcp doctor` counts it (knowledge bases and memory stores,
    # documents and memories apart; kbmcp/store/admin.py), so both say the same.
    contents: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


class _Meter:
    """Progress of one step in rows: a line when it starts, then at most every EVERY seconds the
    rows done and the time left at this step's rate so far."""

    EVERY = 10.0

    def __init__(self, say: Progress, step: str, total: int) -> None:
        self.say, self.step, self.total = say, step, total
        self.done = 0
        self.started = self.shown = time.perf_counter()
        say(f"{step}: {total} rows")

    def add(self, rows: int) -> None:
        self.done += rows
        now = time.perf_counter()
        if now - self.shown < self.EVERY or not 0 < self.done < self.total:
            return
        self.shown = now
        left = (now - self.started) / self.done * (self.total - self.done)
        self.say(
            f"{self.step}: {self.done} of {self.total} rows "
            f"({100 * self.done // self.total}%), about {_duration(left)} left"
        )

    def counted(self, rows: Iterable[Sequence[Any]], every: int = 1000) -> Iterator[Sequence[Any]]:
        """The rows, counted as they are taken."""
        n = 0
        for row in rows:
            yield row
            n += 1
            if n == every:
                self.add(n)
                n = 0
        self.add(n)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def copy_store(
    source: str, destination: str, *, force: bool = False, progress: Progress | None = None
) -> CopyReport:
    """Copy everything from `source` to `destination` (file paths or PostgreSQL URLs)."""
    say = progress or (lambda _line: None)
    if _same(source, destination):
        raise InvalidRequest(
            "SRC and DST are the same database", details={"argument": "destination"}
        )
    started = time.perf_counter()
    report = CopyReport(_shown(source), _shown(destination))
    with _open(source, reading=True) as src, _open(destination, reading=False) as dst:
        with src.snapshot(), dst.transaction():
            _copy(src, dst, report, force=force, say=say)
        dst.settle(say)
    report.seconds = time.perf_counter() - started
    return report


def _copy(src: _Side, dst: _Side, report: CopyReport, *, force: bool, say: Progress) -> None:
    """Every row, inside the destination's one transaction (`copy_store`)."""
    if not dst.is_empty():
        if not force:
            raise StoreError(
                f"{report.destination} already holds a knowledge base: pass --force to "
                "replace everything in it",
                details={"argument": "destination"},
            )
        say("emptying the destination")
        dst.wipe()
    model = src.model()
    dst.prepare()
    with dst.bulk_load(say):
        for table, columns in TABLES:
            if table == "embedding_model":
                if model is not None:
                    dst.record_model(model)
                    dst.insert(table, columns, src.rows(table, columns), replace=True)
                report.rows[table] = int(model is not None)
                continue
            total = src.count(table)
            meter = _Meter(say, f"copying {table}", total)
            if table == "id_key":
                dst.clear_id_key()
            dst.insert(table, columns, meter.counted(src.rows(table, columns)))
            report.rows[table] = total
        report.indexed_chunks = dst.rebuild_indexes(say)
    say("verifying counts")
    _verify(src, dst, report)
    report.contents = count_rows(dst.conn)
    dst.finish(say)


def _verify(src: _Side, dst: _Side, report: CopyReport) -> None:
    differences = []
    for table in (*(name for name, _ in TABLES), *DERIVED):
        have, want = dst.count(table), src.count(table)
        if have != want:
            differences.append(f"{table}: {want} in the source, {have} copied")
    indexed = dst.count_indexed()
    for index, rows in dst.index_counts().items():
        if rows != indexed:
            differences.append(f"{index}: {rows} rows for {indexed} indexed chunks")
    if src.count_indexed() != indexed:
        differences.append(f"indexed chunks: {src.count_indexed()} in the source, {indexed} copied")
    if differences:
        raise StoreError(
            "the copy does not match the source, nothing was written: " + "; ".join(differences)
        )
    report.indexed_chunks = indexed


def _same(source: str, destination: str) -> bool:
    if is_postgres_url(source) or is_postgres_url(destination):
        return source.strip() == destination.strip()
    return Path(source).expanduser().resolve() == Path(destination).expanduser().resolve()


def _shown(target: str) -> str:
    return shown_url(target) if is_postgres_url(target) else str(Path(target).expanduser())


@contextlib.contextmanager
def _open(target: str, *, reading: bool) -> Iterator[_Side]:
    side: _Side
    if is_postgres_url(target):
        side = _PostgresSide(target)
    else:
        side = _SqliteSide(Path(target).expanduser(), create=not reading)
    try:
        yield side
    finally:
        side.close()


class _Side:
    """One end of a copy: the same operations on either backend. What is the same on both is
    written here; each backend's side holds what differs."""

    conn: Any  # the backend's connection

    def close(self) -> None:
        self.conn.close()

    def is_empty(self) -> bool:
        return all(self.count(table) == 0 for table in DATA_TABLES)

    def count(self, table: str) -> int:
        return int(self.conn.execute(COUNT.format(table=table)).fetchone()[0])

    def count_indexed(self) -> int:
        return int(self.conn.execute(COUNT_INDEXED).fetchone()[0])

    def clear_id_key(self) -> None:
        self.conn.execute(CLEAR_ID_KEY)

    def snapshot(self) -> contextlib.AbstractContextManager[None]: ...
    def transaction(self) -> contextlib.AbstractContextManager[None]: ...
    def prepare(self) -> None: ...
    def bulk_load(self, say: Progress) -> contextlib.AbstractContextManager[None]: ...
    def wipe(self) -> None: ...
    def index_counts(self) -> dict[str, int]: ...
    def rows(self, table: str, columns: Sequence[str]) -> Iterable[Sequence[Any]]: ...
    def insert(
        self,
        table: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        replace: bool = False,
    ) -> None: ...
    def model(self) -> ModelFingerprint | None: ...
    def record_model(self, model: ModelFingerprint) -> None: ...
    def rebuild_indexes(self, say: Progress) -> int: ...
    def finish(self, say: Progress) -> None: ...
    def settle(self, say: Progress) -> None:
        """After the commit: what makes the copy fast from its first search."""


COUNT = "SELECT count(*) FROM {table}"
COUNT_INDEXED = "SELECT count(*) FROM indexed_chunk"
CLEAR_ID_KEY = "DELETE FROM id_key"


def _batches(rows: Iterable[Sequence[Any]], size: int = BATCH) -> Iterator[list[Sequence[Any]]]:
    batch: list[Sequence[Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class _SqliteSide(_Side):
    # Emptying a file: the rows (the cascades take documents, revisions, chunks, vectors, tags
    # and shares with their tenants), then the derived indexes. A contentless FTS5 table is
    # emptied with its 'delete-all' command.
    WIPE = (
        "UPDATE document SET current_revision_id = NULL",
        "DELETE FROM token",
        "DELETE FROM tenant",
        "DELETE FROM index_log",
        "INSERT INTO chunk_fts (chunk_fts) VALUES ('delete-all')",
        "DELETE FROM embedding_model",
        "DELETE FROM audit_event",
    )
    INDEXED_REVISIONS = """
        SELECT current_revision_id, title, knowledge_base_id FROM document
        WHERE status = 'published' AND current_revision_id IS NOT NULL
        ORDER BY id"""

    def __init__(self, path: Path, *, create: bool) -> None:
        from kbmcp.store.sqlite.connection import open_connection

        self.conn = open_connection(path, create=create)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        from kbmcp.store.sqlite.connection import write_transaction

        with write_transaction(self.conn):
            # document.current_revision_id names a revision copied after it: checked at commit
            self.conn.execute("PRAGMA defer_foreign_keys = ON")
            yield

    def prepare(self) -> None:
        pass

    def bulk_load(self, say: Progress) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def wipe(self) -> None:
        for statement in self.WIPE:
            self.conn.execute(statement)
        self.conn.execute("DROP TABLE IF EXISTS chunk_vec")

    def index_counts(self) -> dict[str, int]:
        from kbmcp.store.sqlite.search.vector.sql import has_vector_index

        counts = {"chunk_fts": self.count("chunk_fts_docsize")}
        counts["chunk_vec"] = self.count("chunk_vec") if has_vector_index(self.conn) else 0
        return counts

    def rows(self, table: str, columns: Sequence[str]) -> Iterable[Sequence[Any]]:
        order = ORDER.get(table, "id")
        selected = [
            FILE_ROW_STORE[table] if table in FILE_ROW_STORE and column == STORE_COLUMN
            else column
            for column in columns
        ]  # fmt: skip
        return self.conn.execute(f"SELECT {', '.join(selected)} FROM {table} ORDER BY {order}")

    def insert(
        self,
        table: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        replace: bool = False,
    ) -> None:
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        # a file has no store column where PostgreSQL has one (FILE_ROW_STORE)
        kept = [i for i, column in enumerate(columns)
                if not (table in FILE_ROW_STORE and column == STORE_COLUMN)]  # fmt: skip
        marks = ", ".join("?" for _ in kept)
        sql = f"{verb} INTO {table} ({', '.join(columns[i] for i in kept)}) VALUES ({marks})"
        for batch in _batches(rows):
            self.conn.executemany(
                sql, [tuple(_sqlite_value(row[i]) for i in kept) for row in batch]
            )

    def model(self) -> ModelFingerprint | None:
        from kbmcp.store.sqlite.vectors import recorded_model

        return recorded_model(self.conn)

    def record_model(self, model: ModelFingerprint) -> None:
        from kbmcp.store.sqlite.vectors import record_model

        record_model(self.conn, model)

    def rebuild_indexes(self, say: Progress) -> int:
        """FTS5 and vec0 rows of every indexed chunk, written by ingest's own function."""
        from kbmcp.store.sqlite.index import add_to_index, index_rows_of_revision

        indexed = 0
        meter = _Meter(say, "indexing the searchable chunks", self.count_indexed())
        revisions = self.conn.execute(self.INDEXED_REVISIONS).fetchall()
        for revision_id, title, knowledge_base_id in revisions:
            rows = index_rows_of_revision(self.conn, revision_id)
            add_to_index(self.conn, knowledge_base_id, title, rows)
            indexed += len(rows)
            meter.add(len(rows))
        return indexed

    def finish(self, say: Progress) -> None:
        pass


def _sqlite_value(value: Any) -> Any:
    # psycopg gives bytea and vectors as bytes subclasses or memoryviews; apsw wants bytes
    if isinstance(value, bytes | memoryview) and type(value) is not bytes:
        return bytes(value)
    return value


class _PostgresSide(_Side):
    # TRUNCATE empties every table at once; RESTART IDENTITY resets the id sequences. It fires
    # no DELETE trigger: the totals the triggers keep are truncated with their tables.
    WRITTEN_TABLES = (
        "tenant", "knowledge_base", "document", "document_tag", "document_metadata", "revision",
        "chunk", "share", "token", "chunk_vector", "chunk_vec", "chunk_keyword", "chunk_term",
        "keyword_total", "keyword_token", "embedding_model", "source_file", "staged_revision",
        "audit_event",
    )  # fmt: skip
    WIPE = f"TRUNCATE {', '.join(WRITTEN_TABLES)} RESTART IDENTITY"
    # After explicit ids, each identity continues after the largest one.
    IDENTITY_TABLES = (
        "tenant", "knowledge_base", "document", "revision", "chunk", "token", "audit_event",
    )  # fmt: skip
    SET_IDENTITY = """
        SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 0) + 1, false)
        FROM {table}"""

    def __init__(self, url: str) -> None:
        from kbmcp.store.postgres.connection import connect

        self.url = url
        self.conn = connect(url)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        from kbmcp.store.postgres.bulk import begin

        with self.conn.transaction():
            begin(self.conn)
            yield

    def wipe(self) -> None:
        self.conn.execute(self.WIPE)

    def index_counts(self) -> dict[str, int]:
        return {"chunk_keyword": self.count("chunk_keyword"), "chunk_vec": self.count("chunk_vec")}

    def prepare(self) -> None:
        from kbmcp.store.postgres.bulk import prepare

        prepare(self.conn)

    @contextlib.contextmanager
    def bulk_load(self, say: Progress) -> Iterator[None]:
        from kbmcp.store.postgres.bulk import build_progress, deferred_indexes

        # the index builds (the HNSW one in rebuild_indexes, the postings' keys when the load
        # ends) report their progress while it lasts
        with build_progress(self.conn, self.url, say), deferred_indexes(self.conn, say):
            yield

    def rows(self, table: str, columns: Sequence[str]) -> Iterable[Sequence[Any]]:
        from kbmcp.store.postgres.bulk import read_rows

        order = ORDER.get(table, "id")
        sql = f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}"
        return read_rows(self.conn, sql, f"kbmcp_copy_{table}")

    def insert(
        self,
        table: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        replace: bool = False,
    ) -> None:
        from kbmcp.store.postgres.bulk import copy_rows

        if replace:  # the one-row model record: the recorded one gives way to the source's
            self.conn.execute(f"DELETE FROM {table}")
        copy_rows(self.conn, table, columns, ([_postgres_value(v) for v in row] for row in rows))

    def model(self) -> ModelFingerprint | None:
        from kbmcp.store.postgres.vectors import recorded_model

        return recorded_model(self.conn)

    def record_model(self, model: ModelFingerprint) -> None:
        from kbmcp.store.postgres.vectors import record_model

        # the HNSW index is built once the vectors are in (rebuild_indexes): faster than growing it
        record_model(self.conn, model, with_index=False)

    def rebuild_indexes(self, say: Progress) -> int:
        """The keyword rows (tokenised here) and chunk_vec's rows (copied in the server); the
        HNSW index once they are all in (kbmcp/store/postgres/bulk.py)."""
        from kbmcp.store.postgres.bulk import analyze, index_keywords, index_vectors
        from kbmcp.store.postgres.vectors import build_index, recorded_model

        say("analyzing the copied rows")  # the reads below are planned with their statistics
        analyze(self.conn)
        keywords = _Meter(say, "indexing the searchable chunks (keywords)", self.count_indexed())
        indexed = index_keywords(self.conn, keywords.add)
        say("indexing the searchable chunks (vectors)")
        vectors = index_vectors(self.conn)
        if recorded_model(self.conn) is not None:
            say(f"building the HNSW vector index over {vectors} vectors")
            build_index(self.conn)
        return indexed

    def finish(self, say: Progress) -> None:
        from kbmcp.store.postgres.bulk import analyze

        for table in self.IDENTITY_TABLES:
            self.conn.execute(self.SET_IDENTITY.format(table=table))
        say("analyzing the copy (the planner's statistics)")
        analyze(self.conn)

    def settle(self, say: Progress) -> None:
        from kbmcp.store.postgres.bulk import vacuum

        say("vacuuming the copy (index-only reads from the first search)")
        vacuum(self.conn, self.WRITTEN_TABLES)


def _postgres_value(value: Any) -> Any:
    if isinstance(value, str) and "\x00" in value:
        # PostgreSQL text cannot hold NUL; SQLite's can. Say so instead of a driver error.
        raise StoreError(
            "the source holds text with a NUL character, which PostgreSQL cannot store"
        )
    return value
