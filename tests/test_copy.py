"""`kbmcp copy SRC DST`: a file to PostgreSQL and back gives the same knowledge base, row for row
and search for search; a destination in use is never overwritten by accident."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw
import psycopg
import pytest

from kbmcp.store.copy import DERIVED, FILE_ROW_STORE, POSTGRES_DERIVED_COLUMNS, STORE_COLUMN, TABLES
from kbmcp.store.sqlite.connection import open_connection
from tests.postgres_search import build_rich_corpus, every_search

# SQLite tables that are not copied because the destination derives them.
SQLITE_DERIVED = {"document_metadata", "index_log", "sqlite_sequence"}


@pytest.fixture(scope="module")
def round_trip(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[tuple[Path, Path, str]]:
    """(source file, the file copied back from PostgreSQL, the database URL)."""
    from kbmcp.store.copy import copy_store

    root = tmp_path_factory.mktemp("copy")
    source = root / "source.db"
    build_rich_corpus(root / "src", source)
    back = root / "back.db"
    copy_store(str(source), postgres_url, force=True)
    copy_store(postgres_url, str(back))
    yield source, back, postgres_url


def _in_file(table: str, columns: Sequence[str]) -> list[str]:
    """A table's columns in a file: PostgreSQL's store column of some tables is not one."""
    return [c for c in columns if not (table in FILE_ROW_STORE and c == STORE_COLUMN)]


def _dump(path: Path) -> dict[str, list[tuple]]:
    conn = open_connection(path, create=False)
    try:
        return {
            table: sorted(
                conn.execute(f"SELECT {', '.join(_in_file(table, columns))} FROM {table}")
            )
            for table, columns in TABLES
            if table not in ("embedding_model",)
        } | {
            "embedding_model": conn.execute(
                "SELECT name, dimension, version, recorded_at FROM embedding_model"
            ).fetchall(),
            "document_metadata": sorted(conn.execute("SELECT * FROM document_metadata")),
            "indexed": sorted(conn.execute("SELECT * FROM indexed_chunk")),
            "chunk_vec": sorted(conn.execute("SELECT rowid, embedding FROM chunk_vec")),
            "chunk_fts_docsize": sorted(conn.execute("SELECT id, sz FROM chunk_fts_docsize")),
        }
    finally:
        conn.close()


def test_every_row_comes_back_unchanged(round_trip: tuple[Path, Path, str]) -> None:
    source, back, _ = round_trip
    before, after = _dump(source), _dump(back)
    assert before["token"] and before["share"] and before["id_key"]  # the corpus has them all
    for table in before:
        assert after[table] == before[table], table


@pytest.mark.parametrize("tenant", [None, "acme"])
def test_searches_are_identical_after_a_round_trip(
    round_trip: tuple[Path, Path, str], tenant: str | None
) -> None:
    source, back, _ = round_trip
    before = every_search(source, tenant)
    assert any(response["results"] for response in before)  # type: ignore[index]
    assert every_search(back, tenant) == before


def test_the_database_holds_what_the_file_holds(round_trip: tuple[Path, Path, str]) -> None:
    source, _, url = round_trip
    file = _dump(source)
    with psycopg.connect(url) as pg:
        for table, _columns in TABLES:
            count = pg.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert count == len(file[table]) if table != "embedding_model" else count == 1
        indexed = pg.execute("SELECT count(*) FROM indexed_chunk").fetchone()[0]
        assert indexed == len(file["indexed"])
        assert pg.execute("SELECT count(*) FROM chunk_keyword").fetchone()[0] == indexed
        assert pg.execute("SELECT count(*) FROM chunk_vec").fetchone()[0] == indexed
        # the id sequences continue after the copied ids
        next_id = pg.execute("SELECT nextval(pg_get_serial_sequence('chunk', 'id'))").fetchone()
        assert next_id[0] > max(row[0] for row in file["chunk"])


def test_copy_names_every_column_of_both_schemas(round_trip: tuple[Path, Path, str]) -> None:
    """A migration that adds a table or a column to either backend must teach `kbmcp copy`."""
    source, _, url = round_trip
    conn = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
    copied = dict(TABLES)
    sqlite_tables = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'chunk_fts%'"
            " AND name != 'chunk_vec' AND name NOT GLOB 'chunk_vec_*'"
        )
    }
    assert sqlite_tables - SQLITE_DERIVED == set(copied)
    for table, columns in copied.items():
        have = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        assert sorted(have) == sorted(_in_file(table, columns)), table
    conn.close()
    with psycopg.connect(url) as pg:
        for table, columns in copied.items():
            have = [
                row[0]
                for row in pg.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                    (table,),
                )
            ]
            derived = POSTGRES_DERIVED_COLUMNS.get(table, ())
            assert sorted(have) == sorted([*columns, *derived]), table
    assert set(DERIVED) <= SQLITE_DERIVED


def test_a_destination_in_use_needs_force(
    round_trip: tuple[Path, Path, str], kbmcp, tmp_path: Path
) -> None:
    source, back, url = round_trip
    refused = kbmcp("copy", url, back)
    assert refused.code == 1
    assert refused.err.splitlines()[-1].startswith("error: ")
    assert "already holds a knowledge base: pass --force" in refused.err
    other = tmp_path / "other.db"
    copied = kbmcp("copy", url, other)
    assert copied.code == 0, copied.err
    assert "copying chunk:" in copied.err  # progress, on stderr
    assert "counts verified" in copied.out
    again = kbmcp("copy", "--force", url, other, "--json")
    assert again.code == 0, again.err
    report = again.json()
    assert report["rows"]["document"] == len(_dump(source)["document"])
    copied_rows, source_rows = _dump(other), _dump(source)
    # the copy is recorded in the destination's audit trail, after the rows it copied
    trail = copied_rows.pop("audit_event")
    assert [(row[5], row[6]) for row in trail] == [("copy", "ok")]
    source_rows.pop("audit_event")
    assert copied_rows == source_rows


def test_copying_to_itself_is_refused(kbmcp, round_trip: tuple[Path, Path, str]) -> None:
    source, _, _ = round_trip
    result = kbmcp("copy", source, source)
    assert result.code == 1 and "the same database" in result.err


def _postings_schema(url: str) -> tuple[list[tuple], list[tuple]]:
    """chunk_term's indexes and the constraints from and to it, as the catalog defines them."""
    with psycopg.connect(url) as pg:
        indexes = pg.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunk_term' ORDER BY 1"
        ).fetchall()
        constraints = pg.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE 'chunk_term'::regclass IN (conrelid, confrelid) AND contype IN ('p', 'f')"
            " ORDER BY 1"
        ).fetchall()
    return indexes, constraints


def test_the_postings_get_back_their_indexes_and_key(
    round_trip: tuple[Path, Path, str], new_postgres_url: str
) -> None:
    """The load drops chunk_term's indexes and foreign key and builds them at the end: the copy
    has exactly those of a database the migrations made, and its planner statistics."""
    _, _, url = round_trip
    indexes, constraints = _postings_schema(new_postgres_url)
    assert len(indexes) == 3 and len(constraints) == 2  # the primary key, by impact, by chunk id
    assert _postings_schema(url) == (indexes, constraints)
    with psycopg.connect(url) as pg:
        analyzed = pg.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'chunk_term'")
        assert analyzed.fetchone()[0] > 0
        # the per-token counts the triggers keep match the postings loaded in batches
        assert (
            pg.execute(
                "SELECT token, knowledge_base_id, count(*) FROM chunk_term GROUP BY 1, 2"
                " EXCEPT SELECT token, knowledge_base_id, rows FROM keyword_token"
            ).fetchall()
            == []
        )


def test_the_copy_vacuums_every_table_it_wrote(round_trip: tuple[Path, Path, str]) -> None:
    """After the commit the copy runs VACUUM on each table it wrote (last_vacuum is set by an
    explicit VACUUM only, never by autovacuum), which marks the pages all-visible: an
    index-only scan of the postings or of a scope's chunk ranges then reads no heap page.
    The marks themselves are not asserted: a page whose rows an older snapshot may still not
    see (autovacuum's analyze of the new rows, running at that moment) is left unmarked."""
    from kbmcp.store.copy import _PostgresSide

    _, _, url = round_trip
    with psycopg.connect(url) as pg:
        rows = pg.execute(
            "SELECT relname, last_vacuum IS NOT NULL FROM pg_stat_user_tables"
            " WHERE relname = ANY(%s)",
            [list(_PostgresSide.WRITTEN_TABLES)],
        ).fetchall()
    vacuumed = dict(rows)
    assert set(vacuumed) == set(_PostgresSide.WRITTEN_TABLES)
    assert all(vacuumed.values()), vacuumed


def test_a_failed_copy_leaves_the_database_as_it_was(
    round_trip: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbmcp.store.copy import copy_store
    from kbmcp.store.postgres import bulk

    source, _, url = round_trip
    schema = _postings_schema(url)
    with psycopg.connect(url) as pg:
        before = {t: pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t, _ in TABLES}

    def broken(conn: psycopg.Connection) -> int:
        raise RuntimeError("the server went away")

    monkeypatch.setattr(bulk, "index_vectors", broken)  # after the load, before the indexes
    with pytest.raises(RuntimeError):
        copy_store(str(source), url, force=True)
    with psycopg.connect(url) as pg:
        after = {t: pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t, _ in TABLES}
    assert after == before
    assert _postings_schema(url) == schema


def test_progress_counts_rows_and_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbmcp.store import copy

    clock = iter(range(0, 1000, 3))  # every reading 3 s later
    monkeypatch.setattr(copy.time, "perf_counter", lambda: float(next(clock)))
    lines: list[str] = []
    meter = copy._Meter(lines.append, "copying chunk", 10_000)
    rows = list(meter.counted(((i,) for i in range(10_000)), every=1000))
    assert len(rows) == 10_000
    assert lines[0] == "copying chunk: 10000 rows"
    # a line at most every 10 s: at 12 s (4,000 rows done) 18 s are left at that rate
    assert lines[1] == "copying chunk: 4000 of 10000 rows (40%), about 18 s left"
    assert all("of 10000 rows" in line for line in lines[1:]) and len(lines) == 3


def test_postings_written_in_overlapping_batches_have_their_batch_impact(
    round_trip: tuple[Path, Path, str], new_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword rows are made a batch at a time while the previous batch is written (another
    thread): every chunk is indexed once, and each posting's impact uses its store's average
    length once its batch is in, as index_chunks would for the same batches."""
    import struct

    from kbmcp.store.copy import copy_store
    from kbmcp.store.postgres import bulk, keyword

    source, _, _ = round_trip
    monkeypatch.setattr(bulk, "KEYWORD_BATCH", 4)
    copy_store(str(source), new_postgres_url, force=True)
    with psycopg.connect(new_postgres_url) as pg:
        chunks = pg.execute(
            "SELECT chunk_id, knowledge_base_id, title_tokens + heading_tokens + body_tokens"
            " FROM chunk_keyword ORDER BY chunk_id"
        ).fetchall()
        postings = pg.execute(
            "SELECT chunk_id, in_title, in_heading, in_body, length, impact FROM chunk_term"
        ).fetchall()
        assert len(chunks) == pg.execute("SELECT count(*) FROM indexed_chunk").fetchone()[0]
    assert len(chunks) > 3 * 4  # several batches, the last one short
    totals: dict[int, list[int]] = {}
    average: dict[int, dict[int, float]] = {}  # chunk -> its batch's average length per store
    for start in range(0, len(chunks), 4):
        batch = chunks[start : start + 4]
        for _, store, length in batch:
            total = totals.setdefault(store, [0, 0])
            total[0] += 1
            total[1] += length
        averages = {store: max(tokens / rows, 1.0) for store, (rows, tokens) in totals.items()}
        average.update({chunk_id: averages for chunk_id, _, _ in batch})

    def real(value: float) -> float:  # the column is real (float4)
        return struct.unpack("f", struct.pack("f", value))[0]

    store_of = {chunk_id: store for chunk_id, store, _ in chunks}
    for chunk_id, title, heading, body, length, impact in postings:
        avgdl = average[chunk_id][store_of[chunk_id]]
        assert real(impact) == real(keyword.impact(title, heading, body, length, avgdl))


def test_the_load_raises_memory_settings_and_never_lowers_them(new_postgres_url: str) -> None:
    from kbmcp.store.postgres import bulk

    size = "SELECT pg_size_bytes(current_setting('maintenance_work_mem'))"
    with psycopg.connect(new_postgres_url) as pg:
        with pg.transaction():
            bulk.prepare(pg)
            assert pg.execute(size).fetchone()[0] >= 512 * 1024**2
            pg.execute("SET LOCAL maintenance_work_mem = '3GB'")  # a server set up for 1M chunks
            bulk.prepare(pg)
            assert pg.execute(size).fetchone()[0] == 3 * 1024**3
        assert pg.execute(size).fetchone()[0] < 3 * 1024**3  # for the transaction only


def test_an_index_build_reports_its_progress(
    new_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HNSW build and the postings' keys take minutes on a large copy: a second connection
    reads the build's progress from the server and says it."""
    from kbmcp.store.postgres import bulk

    monkeypatch.setattr(bulk, "PROGRESS_EVERY", 0.02)
    lines: list[str] = []
    with psycopg.connect(new_postgres_url, autocommit=True) as pg:
        pg.execute("CREATE TABLE wide AS SELECT g AS id, md5(g::text) AS t"
                   " FROM generate_series(1, 300000) AS g")  # fmt: skip
        with bulk.build_progress(pg, new_postgres_url, lines.append):
            pg.execute("CREATE INDEX wide_by_t ON wide (t, id)")
    assert lines and all(line.startswith("building an index of wide (") for line in lines)
