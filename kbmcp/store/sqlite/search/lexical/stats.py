"""The keyword channel's statistics: bm25 over the rows the caller may read, not the whole file.

bm25 (bm25.py) needs N (rows), the average row length (total tokens / N) and, per query phrase,
n (rows containing it). FTS5's own `bm25()` takes them from the whole index, which holds every
tenant's chunks: a caller could read from its own scores how many chunks of other tenants
contain a word (store a one-word memory, search it, compare scores). So the statistics are
those of the caller's *readable set*: every indexed chunk of the knowledge bases and memory
stores the principal may read, before the request's own filters (filters and the include_*
switches never change a score). Nothing outside the readable set reaches a keyword score.

When the principal reads every store of the file, the readable set is the whole index: FTS5's
own statistics are used unchanged (its averages record, fts5vocab), at no extra cost. Both are
integer counts of the same rows then, so both definitions give the same floats bit for bit
(tests/test_search_keyword_stats.py).

Computing them for a smaller readable set (docs/search.md, "Keyword statistics"):
- N and the total tokens: the readable chunks' FTS5 docsize records (one varint per column),
  summed with numpy; a long-lived process keeps every row's length (postings.py) and caches the
  readable set's totals until the index changes;
- n of a phrase: the rows of the phrase's doclist that are in the readable set (`PHRASE_ROWS`,
  tested with numpy), or the accelerator's postings of the phrase inside the set; kept per
  readable set until the index changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import apsw
import numpy as np

from kbmcp.search.lexical.bm25 import IndexStats
from kbmcp.search.query_text import quote_term
from kbmcp.store.sqlite.search.sorted_ids import positions_of
from kbmcp.store.tokenizer import query_tokens

if TYPE_CHECKING:
    from kbmcp.store.sqlite.search.lexical.own_tokens import OwnTokens

COLUMNS = 3  # chunk_fts: title, heading, body (a docsize record has one varint per column)
# The indexed chunks (the rows of chunk_fts) of some knowledge bases and memory stores.
SELECT_CHUNKS_OF_STORES = """
SELECT chunk_id FROM indexed_chunk
WHERE knowledge_base_id IN carray(:stores)
ORDER BY chunk_id
"""
# Per-row column sizes of some rows, in id order (one varint per column each).
SELECT_SIZES = "SELECT id, sz FROM chunk_fts_docsize WHERE id IN carray(:ids) ORDER BY id"
# The span and count of some stores' indexed chunks, and the index rows in an id range: equal
# counts mean the range holds exactly those chunks' rows.
SPAN_OF_STORES = """
SELECT min(chunk_id), max(chunk_id), count(*) FROM indexed_chunk
WHERE knowledge_base_id IN carray(:stores)
"""
COUNT_ROWS_BETWEEN = "SELECT count(*) FROM chunk_fts_docsize WHERE id BETWEEN :low AND :high"
# The docsize records of a range, or of some rows, as one hex string in id order, with their
# count: one string is ~10x faster to read than a row per record (group_concat would read raw
# blobs as text, hence hex).
SIZES_BETWEEN = """
SELECT count(*), group_concat(hex(sz), '' ORDER BY id)
FROM chunk_fts_docsize WHERE id BETWEEN :low AND :high
"""
# The same, unordered: for the total of a range's sizes (an ORDER BY would sort the records).
SIZES_TOTAL_BETWEEN = """
SELECT group_concat(hex(sz), '') FROM chunk_fts_docsize WHERE id BETWEEN :low AND :high
"""
SIZES_OF = """
SELECT count(*), group_concat(hex(sz), '' ORDER BY id)
FROM chunk_fts_docsize WHERE id IN carray(:ids)
"""
# Rows of an id range that contain a phrase. Plain `rowid BETWEEN` (no `+`): FTS5 takes the
# range as its own and reads only that part of the doclist.
COUNT_BETWEEN = """
SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH :phrase AND rowid BETWEEN :low AND :high
"""
# Every row that contains a phrase (its doclist; membership in a readable set is tested in
# numpy: an `IN carray(...)` of 100k ids costs ~15 ms to build per statement, the doclist of a
# rare word ~0.2 ms to read).
PHRASE_ROWS = "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH :phrase"


def chunks_of_stores(conn: apsw.Connection, store_ids: Sequence[int]) -> np.ndarray:
    """The indexed chunk ids (ascending int64) of these stores."""
    stores = np.asarray(sorted(store_ids), dtype=np.int64)
    if len(stores) == 0:
        return np.zeros(0, dtype=np.int64)
    rows = conn.execute(SELECT_CHUNKS_OF_STORES, {"stores": apsw.carray(stores)}).fetchall()
    return np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))


def indexed_rows(conn: apsw.Connection, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Those of `ids` (ascending) that are rows of the index, and FTS5's D of each (tokens over
    every column), from their docsize records."""
    if len(ids) == 0:
        return ids, np.zeros(0, dtype=np.int64)
    count, sizes = conn.execute(SIZES_OF, {"ids": apsw.carray(ids)}).fetchone()
    lengths = _row_lengths(count, sizes) if count == len(ids) else None
    if lengths is not None:
        return ids, lengths
    rows = conn.execute(SELECT_SIZES, {"ids": apsw.carray(ids)}).fetchall()
    present = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    return present, varint_sums([row[1] for row in rows])


def _row_lengths(count: int, sizes: str | None) -> np.ndarray | None:
    """Each row's D from its docsize records as one hex string, in row order: one varint per
    column each (None if the records hold anything else)."""
    values = varint_values(bytes.fromhex(sizes or ""))
    if len(values) != count * COLUMNS:
        return None
    return values.reshape(count, COLUMNS).sum(axis=1)


def varint_values(data: bytes) -> np.ndarray:
    """The SQLite varints of a run of bytes (int64), vectorised: a byte with its high bit clear
    ends a varint, which is big-endian in groups of 7 bits. Token counts never need the 9-byte
    form (values of 2^56 and more), which this does not decode."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw < 0x80)
    if len(ends) == 0:
        return np.zeros(0, dtype=np.int64)
    raw = raw[: ends[-1] + 1]
    # Each byte's distance to the last byte of its varint: its group of 7 bits from the right.
    last = ends[np.searchsorted(ends, np.arange(len(raw)))]
    shifted = (raw & 0x7F).astype(np.int64) << ((last - np.arange(len(raw))) * 7)
    return np.add.reduceat(shifted, np.concatenate([[0], ends[:-1] + 1]))


def varint_sums(blobs: Sequence[bytes]) -> np.ndarray:
    """The sum of the SQLite varints in each blob (int64; see varint_values)."""
    lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    sums = np.zeros(len(blobs), dtype=np.int64)
    if len(data) == 0:
        return sums
    ends = np.flatnonzero(data < 0x80)
    last = ends[np.searchsorted(ends, np.arange(len(data)))]
    shifted = (data & 0x7F).astype(np.int64) << ((last - np.arange(len(data))) * 7)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    nonempty = lengths > 0
    sums[nonempty] = np.add.reduceat(shifted, starts[nonempty])
    return sums


def stats_of(lengths: np.ndarray) -> IndexStats:
    """N and the total tokens of a set of rows, from their lengths."""
    return IndexStats(rows=len(lengths), total_tokens=int(lengths.sum()))


@dataclass
class InsidePostings:
    """A phrase's postings restricted to a readable set: the rows, as positions in the set's
    rows (ascending), and the phrase's bm25 term in each for the set's statistics."""

    rows: np.ndarray  # int32 positions into ReadableRows.ids / .positions
    contributions: np.ndarray  # float64


@dataclass
class ReadableRows:
    """A readable set as the index holds it, in one snapshot: N and the total tokens, its rows
    (`ids` ascending, with each row's length D) or the id range that holds exactly its rows
    (`interval`: every row of the index with lo <= rowid <= hi, and no other), and each
    phrase's n once asked for (keyed by quoted phrase)."""

    stats: IndexStats
    ids: np.ndarray | None = None
    lengths: np.ndarray | None = None
    interval: tuple[int, int] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    # Where the rows are among an accelerator's postings rows (postings.py), when it made them.
    positions: np.ndarray | None = None
    # Each phrase's postings inside the set, once asked for (postings.py `PostingsIndex.inside`).
    inside: dict[str, InsidePostings] = field(default_factory=dict)
    # Phrases are found in the set's own rows' tokens (own_tokens.py), not the whole index.
    own: OwnTokens | None = None
    _member: np.ndarray | None = field(default=None, repr=False)  # by chunk id

    def containing(self, conn: apsw.Connection, terms: Sequence[str]) -> dict[str, int]:
        """n of each term (rows of the set that contain it as a phrase), keyed by term."""
        if self.own is not None:
            self._count_own(conn, terms)
        for term in terms:
            phrase = quote_term(term)
            if phrase in self.counts:
                continue
            if self.interval is not None:
                low, high = self.interval
                found = conn.execute(COUNT_BETWEEN, {"phrase": phrase, "low": low, "high": high})
                self.counts[phrase] = int(found.fetchone()[0])
            else:
                self.counts[phrase] = int(np.count_nonzero(self._holds(phrase_rows(conn, phrase))))
        return {term: self.counts[quote_term(term)] for term in terms}

    def _count_own(self, conn: apsw.Connection, terms: Sequence[str]) -> None:
        """n of the terms not counted yet, from the set's own rows (own_tokens.py); when their
        text differs from the index, the set stops using its own tokens."""
        assert self.own is not None
        missing = list(dict.fromkeys(t for t in terms if quote_term(t) not in self.counts))
        if not missing:
            return
        phrases = [(term, query_tokens(term)) for term in missing]
        if any(not tokens for _, tokens in phrases):
            return  # FTS5 decides what such a term means: counted below
        frequency = self.own.frequencies(conn, self, phrases)
        if frequency is None:
            self.own = None
            return
        for (term, _), row in zip(phrases, frequency, strict=True):
            self.counts[quote_term(term)] = int(np.count_nonzero(row))

    def lengths_of(self, conn: apsw.Connection, chunk_ids: np.ndarray) -> np.ndarray:
        """D of each of `chunk_ids` (ascending, rows of this set; 0 for an id the index does
        not hold)."""
        if self.ids is not None and self.lengths is not None:
            positions = positions_of(self.ids, chunk_ids)
            return np.where(positions >= 0, self.lengths[positions], 0)
        if self.interval is not None and len(chunk_ids) == self.stats.rows:  # every row
            low, high = self.interval
            count, sizes = conn.execute(SIZES_BETWEEN, {"low": low, "high": high}).fetchone()
            lengths = _row_lengths(count, sizes)
            if lengths is not None:
                return lengths
        present, lengths = indexed_rows(conn, chunk_ids)
        out = np.zeros(len(chunk_ids), dtype=np.int64)
        out[positions_of(chunk_ids, present)] = lengths
        return out

    def _holds(self, chunk_ids: np.ndarray) -> np.ndarray:
        """A mask over `chunk_ids`: True for the rows of this set (`ids` given)."""
        assert self.ids is not None
        if self._member is None:
            self._member = np.zeros(int(self.ids.max()) + 1 if len(self.ids) else 0, dtype=bool)
            self._member[self.ids] = True
        inside = chunk_ids < len(self._member)
        held = np.zeros(len(chunk_ids), dtype=bool)
        held[inside] = self._member[chunk_ids[inside]]
        return held


def phrase_rows(conn: apsw.Connection, phrase: str) -> np.ndarray:
    """Every row of the index that contains a (quoted) phrase."""
    rows = conn.execute(PHRASE_ROWS, {"phrase": phrase}).fetchall()
    return np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))


def readable_rows(
    conn: apsw.Connection, store_ids: Sequence[int], chunk_ids: np.ndarray | None = None
) -> ReadableRows:
    """The readable set of these stores, read from the file (a process without accelerators);
    `chunk_ids`: their indexed chunks, when the caller has them already.

    When the stores' indexed chunks are exactly the index rows of one id range (one tenant's
    knowledge base ingested at once, a file whose other stores lie elsewhere), the set is that
    range: N and the total tokens come from the range's docsize records, and each n from FTS5
    walking the phrase's doclist over the range (at 100k readable rows: ~30 ms for N and the
    total instead of ~75 ms for the rows' ids and sizes, and ~3.5 ms instead of ~40 ms for a
    common word's n)."""
    stores = np.asarray(sorted(store_ids), dtype=np.int64)
    if len(stores) == 0:  # carray refuses an empty array
        return ReadableRows(IndexStats(0, 0), _NONE, _NONE)
    low, high, count = conn.execute(SPAN_OF_STORES, {"stores": apsw.carray(stores)}).fetchone()
    if count == 0:
        return ReadableRows(IndexStats(0, 0), _NONE, _NONE)
    bounds = {"low": low, "high": high}
    if conn.execute(COUNT_ROWS_BETWEEN, bounds).fetchone()[0] == count:
        sizes = conn.execute(SIZES_TOTAL_BETWEEN, bounds).fetchone()[0]
        total = int(varint_values(bytes.fromhex(sizes or "")).sum())
        return ReadableRows(IndexStats(count, total), interval=(low, high))
    if chunk_ids is None:
        chunk_ids = chunks_of_stores(conn, store_ids)
    ids, lengths = indexed_rows(conn, chunk_ids)
    return ReadableRows(stats_of(lengths), ids, lengths)


_NONE = np.zeros(0, dtype=np.int64)
