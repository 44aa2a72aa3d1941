"""Accelerator: an in-memory impact index for large scopes and unscoped keyword searches.

Why: FTS5's doclist walk is cheap (counting the 91k rows of a common term: ~3 ms at 100k
chunks) but its bm25 is not: it reads each matching row's sizes from docsize and scores it
(~0.5 us a row), for every row that contains any query term, on every query. A term's bm25
contribution to a row does not depend on the rest of the query: FTS5 sums one term per phrase,
in query order, and a phrase absent from a row adds exactly 0.0. So the index keeps, per query
phrase, the rows that contain it and the phrase's column-weighted frequency f in each, and per
row its length D; a search computes each phrase's contributions with FTS5's formula
(bm25.py: same operations, same order, same floats) from the index's current N and average
length, or from those of the caller's readable set (stats.py: N, lengths and n counted over
its rows here), and sums them in query order with numpy: the same ranking as the OR query.

Filling a phrase: one single-phrase `-bm25()` query gives FTS5's contribution c to each row
containing it; with N, n, D and avgdl of the same snapshot, f = c*K / (idf*(k1+1) - c) (bm25
solved for f), rounded to the 1/1024 grid that column-weight sums lie on. Every recovered f is
checked by recomputing c bit for bit; a phrase that fails the check is not kept.

Writes: the owning accelerator (search/accelerator.py) passes the documents that the index
change log names. Their old rows are marked dead; their new chunks (new revisions get new,
larger chunk ids) are appended, tokenised with the index's tokenizer (scan.py) to add their
postings for every kept phrase. Contributions are recomputed on the next query because N,
avgdl and n changed; nothing is fetched again. A re-indexed chunk that keeps its id (a document
retitled or restored) drops the whole index instead (rare).

Memory: 12 bytes per kept (row, phrase) pair (int32 row + float64 f); at most MAX_POSTINGS
pairs, least recently used phrases evicted first. The postings inside readable sets (`inside`)
take 12 bytes per pair too (int32 position + float64 contribution), at most MAX_INSIDE_POSTINGS
pairs over every set, least recently used first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import apsw
import numpy as np

from kbmcp.search.lexical import bm25
from kbmcp.store.sqlite.search.growth import capacity_for, grown
from kbmcp.store.sqlite.search.lexical import fts
from kbmcp.store.sqlite.search.lexical.scan import Phrase, exact_weights, phrase_frequencies
from kbmcp.store.sqlite.search.lexical.stats import (
    InsidePostings,
    ReadableRows,
    stats_of,
    varint_sums,
)
from kbmcp.store.sqlite.search.lexical.tokens import TokenCache
from kbmcp.store.sqlite.search.sorted_ids import positions_of, present_positions
from kbmcp.store.tokenizer import query_tokens

MAX_POSTINGS = 8_000_000  # ~96 MB: every (row, term) pair of ~100k chunks of ~90 words
MAX_INSIDE_POSTINGS = 4_000_000  # ~48 MB over every readable set

# Every indexed row with its recorded sizes (docsize has one row per row of chunk_fts).
SELECT_INDEXED_ROWS = "SELECT id, sz FROM chunk_fts_docsize {where} ORDER BY id"
OF_CHUNKS = "WHERE id IN carray(:ids)"
# The indexed chunks of some documents (what the change log names).
SELECT_DOCUMENT_CHUNKS = """
SELECT chunk_id FROM indexed_chunk WHERE document_id IN carray(:documents) ORDER BY chunk_id
"""
# Every chunk of every revision of some documents (their rows may be held from an old revision).
SELECT_ALL_CHUNKS_OF_DOCUMENTS = """
SELECT c.id FROM chunk AS c JOIN revision AS r ON r.id = c.revision_id
WHERE r.document_id IN carray(:documents)
"""
# fts5vocab 'instance' over the index (temp: per connection, so no migration): a row per
# occurrence of a token (term, doc, col, offset), read from the token's doclist alone.
CREATE_INSTANCES = """
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_fts_instance
USING fts5vocab(main, chunk_fts, instance)
"""
# One token's occurrences as strings: the rows, and (when the columns weigh differently) each
# occurrence's column number (title 0, heading 1, body 2). The doclist is walked in C and read
# as one or two values instead of a tuple per row, and with no per-row bm25 (FTS5's bm25 reads
# each row's docsize record: most of a single-phrase query). Per token of ~15,000 rows (100k
# SciFact abstracts, CPU): rows only 5.3 ms, rows and columns 11.1 ms, FTS5's bm25 14.7 ms.
TOKEN_INSTANCE_ROWS = """
SELECT group_concat(doc, ',') FROM temp.chunk_fts_instance WHERE term = :token
"""
TOKEN_INSTANCE_COLUMNS = """
SELECT group_concat(doc, ','),
       group_concat(CASE col WHEN 'title' THEN 0 WHEN 'heading' THEN 1 ELSE 2 END, ',')
FROM temp.chunk_fts_instance
WHERE term = :token
"""
# FTS5's contribution of one phrase to every row containing it (bm25() is "lower is better").
PHRASE_CONTRIBUTIONS = """
SELECT rowid, -bm25(chunk_fts, :w_title, :w_heading, :w_body)
FROM chunk_fts
WHERE chunk_fts MATCH :phrase
"""


@dataclass
class Postings:
    positions: np.ndarray  # int32 row positions, ascending
    frequencies: np.ndarray  # float64: FTS5's f (column-weighted instances) in each row
    # Contributions for the index statistics they were computed with (recomputed after writes).
    contributions: np.ndarray | None = None
    stats_key: tuple[int, int, int, int] | None = None  # (N, total tokens, n, generation)
    solved: bool = True  # `frequencies` reproduce FTS5's contributions (see _fill)


@dataclass
class PostingsIndex:
    weights: tuple[float, float, float]
    phrases: OrderedDict[str, Postings] = field(default_factory=OrderedDict)
    size: int = 0  # kept (row, phrase) pairs
    # Rows containing each phrase (the n of its idf), also for phrases without postings. Only
    # valid for one state of the index: cleared on every change.
    row_counts: dict[str, int] = field(default_factory=dict)
    _rowids: np.ndarray | None = None  # sorted; capacity beyond _rows is unused
    _lengths: np.ndarray | None = None  # D of each row
    _alive: np.ndarray | None = None
    _rows: int = 0
    _generation: int = 0  # bumped whenever rows change: invalidates every phrase's n
    # Every readable set's postings kept in its `inside`, least recently used first, to evict
    # from when they hold more than MAX_INSIDE_POSTINGS pairs: (id of the set, phrase) -> set.
    _inside_order: OrderedDict[tuple[int, str], ReadableRows] = field(default_factory=OrderedDict)
    inside_size: int = 0  # pairs held in every readable set's `inside`

    # ------------------------------------------------------------------ rows

    def _load_rows(self, conn: apsw.Connection) -> None:
        rows = conn.execute(SELECT_INDEXED_ROWS.format(where="")).fetchall()
        self._rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        self._lengths = varint_sums([r[1] for r in rows])
        self._alive = np.ones(len(rows), dtype=bool)
        self._rows = len(rows)

    def rowids(self, conn: apsw.Connection) -> np.ndarray:
        """Every row id held (int64, sorted; dead rows included); postings hold positions."""
        if self._rowids is None:
            self._load_rows(conn)
        assert self._rowids is not None
        return self._rowids[: self._rows]

    # ------------------------------------------------------------------ writes

    def update_documents(
        self,
        conn: apsw.Connection,
        document_ids: Sequence[int],
        tokenize: apsw.FTS5Tokenizer,
        tokens: TokenCache,
    ) -> bool:
        """Apply the index changes of these documents; False when the index must be dropped
        instead (a chunk re-indexed under its old id, or text that differs from the index)."""
        self.row_counts.clear()
        if self._rowids is None:
            return True  # nothing loaded yet: rows are read on first use
        if not all(postings.solved for postings in self.phrases.values()):
            return False
        documents = np.asarray(sorted(set(document_ids)), dtype=np.int64)
        rows = conn.execute(SELECT_DOCUMENT_CHUNKS, {"documents": apsw.carray(documents)})
        current = np.fromiter((r[0] for r in rows), dtype=np.int64)
        rowids = self.rowids(conn)
        assert self._alive is not None and self._lengths is not None
        # Rows of these documents that are no longer indexed: dead. (Rows of other documents
        # are untouched, so only rows among these documents' old chunks can die; finding them
        # needs the chunk -> document map, which the chunk table gives.)
        old = self._rows_of_documents(conn, documents)
        self._alive[old] = False
        known = positions_of(rowids, current) >= 0
        if known.any():
            return False  # re-indexed under the same id: its text (title) may have changed
        new = current[~known]
        if len(new) and len(rowids) and new[0] <= rowids[-1]:
            return False
        self._generation += 1
        if len(new) == 0:
            return True
        return self._append(conn, new, tokenize, tokens)

    def _rows_of_documents(self, conn: apsw.Connection, documents: np.ndarray) -> np.ndarray:
        """Rows held for any chunk of any revision of these documents."""
        rows = conn.execute(SELECT_ALL_CHUNKS_OF_DOCUMENTS, {"documents": apsw.carray(documents)})
        chunk_ids = np.fromiter((r[0] for r in rows), dtype=np.int64)
        return present_positions(self.rowids(conn), chunk_ids)

    def _append(
        self,
        conn: apsw.Connection,
        new: np.ndarray,
        tokenize: apsw.FTS5Tokenizer,
        tokens: TokenCache,
    ) -> bool:
        phrases: list[Phrase] = [(phrase, _phrase_tokens(phrase)) for phrase in self.phrases]
        found = phrase_frequencies(conn, phrases, new, self.weights, tokenize, tokens)
        if found is None:
            return False
        frequency, _ = found
        sizes = conn.execute(
            SELECT_INDEXED_ROWS.format(where=OF_CHUNKS), {"ids": apsw.carray(new)}
        ).fetchall()
        if len(sizes) != len(new):
            return False
        lengths = varint_sums([r[1] for r in sizes])
        start = self._grow(len(new))
        assert self._rowids is not None and self._lengths is not None and self._alive is not None
        self._rowids[start : start + len(new)] = new
        self._lengths[start : start + len(new)] = lengths
        self._alive[start : start + len(new)] = True
        self._rows = start + len(new)
        for i, postings in enumerate(self.phrases.values()):
            hit = np.flatnonzero(frequency[i] > 0)
            if len(hit):
                postings.positions = np.concatenate(
                    [postings.positions, (start + hit).astype(np.int32)]
                )
                postings.frequencies = np.concatenate([postings.frequencies, frequency[i][hit]])
                self.size += len(hit)
        return True

    def _grow(self, count: int) -> int:
        assert self._rowids is not None and self._lengths is not None and self._alive is not None
        start = self._rows
        if start + count > len(self._rowids):
            capacity = capacity_for(len(self._rowids), start + count)
            self._rowids = grown(self._rowids, capacity)
            self._lengths = grown(self._lengths, capacity)
            self._alive = grown(self._alive, capacity)
        return start

    # ------------------------------------------------------------------ reads

    def postings(self, conn: apsw.Connection, phrase: str, stats: bm25.IndexStats) -> Postings:
        cached = self.phrases.get(phrase)
        if cached is not None:
            self.phrases.move_to_end(phrase)
            return cached
        found = self._fill(conn, phrase, stats)
        self.phrases[phrase] = found
        self.size += len(found.positions)
        while self.size > MAX_POSTINGS and len(self.phrases) > 1:
            _, evicted = self.phrases.popitem(last=False)
            self.size -= len(evicted.positions)
        return found

    def _fill(self, conn: apsw.Connection, phrase: str, stats: bm25.IndexStats) -> Postings:
        tokens = _phrase_tokens(phrase)
        if len(tokens) == 1 and exact_weights(self.weights):
            counted = self._fill_from_instances(conn, tokens[0])
            if counted is not None:
                return counted
        return self._fill_from_bm25(conn, phrase, stats)

    def _fill_from_instances(self, conn: apsw.Connection, token: str) -> Postings | None:
        """A single token's postings from its occurrences (fts5vocab 'instance'): f of a row is
        FTS5's own sum of one column weight per occurrence, exact whatever the statistics
        (weights lie on the 1/1024 grid: `exact_weights`); contributions follow from f, the
        row's length and the statistics as `contributions` computes them, FTS5's operations.
        None when the index names a row this index does not hold (then the bm25 fill)."""
        conn.execute(CREATE_INSTANCES)
        uniform = len(set(self.weights)) == 1  # then f is the weight times the occurrences
        found = conn.execute(
            TOKEN_INSTANCE_ROWS if uniform else TOKEN_INSTANCE_COLUMNS, {"token": token}
        ).fetchone()
        if not found[0]:
            return Postings(np.zeros(0, np.int32), np.zeros(0, np.float64))
        rows = np.fromstring(found[0], dtype=np.int64, sep=",")
        if uniform:
            weight = np.full(len(rows), self.weights[0], dtype=np.float64)
        else:
            columns = np.fromstring(found[1], dtype=np.intp, sep=",")
            if len(rows) != len(columns):
                return None
            weight = np.asarray(self.weights, dtype=np.float64)[columns]
        if len(rows) > 1 and not np.all(rows[1:] >= rows[:-1]):
            order = np.argsort(rows, kind="stable")
            rows, weight = rows[order], weight[order]
        starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        rowids = rows[starts]
        # Sums of grid weights are exact in any order: FTS5 adds them one occurrence at a time.
        frequencies = np.add.reduceat(weight, starts)
        held = self.rowids(conn)
        positions = np.searchsorted(held, rowids)
        if np.any(positions >= len(held)) or not np.array_equal(held[positions], rowids):
            return None
        return Postings(positions.astype(np.int32), frequencies)

    def _fill_from_bm25(
        self, conn: apsw.Connection, phrase: str, stats: bm25.IndexStats
    ) -> Postings:
        """Any phrase's postings from FTS5's single-phrase bm25 (f solved from it)."""
        rows = conn.execute(
            PHRASE_CONTRIBUTIONS,
            {
                "phrase": phrase,
                "w_title": self.weights[0],
                "w_heading": self.weights[1],
                "w_body": self.weights[2],
            },
        ).fetchall()
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        contributions = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        order = np.argsort(rowids, kind="stable")
        rowids, contributions = rowids[order], contributions[order]
        positions = np.searchsorted(self.rowids(conn), rowids).astype(np.int32)
        assert self._lengths is not None
        lengths = self._lengths[positions]
        idf = bm25.idf(stats.rows, len(rows))
        frequencies = bm25.solve_frequency(contributions, idf, lengths, stats.avgdl)
        postings = Postings(positions, frequencies)
        if not np.array_equal(
            bm25.contributions(idf, frequencies, lengths, stats.avgdl), contributions
        ):
            # Cannot happen with the grid weights the engine uses; stay exact regardless: these
            # contributions are served until the next write, which then drops the index.
            postings.solved = False
        postings.contributions = contributions
        postings.stats_key = self._stats_key(stats, len(rows))
        return postings

    def _stats_key(self, stats: bm25.IndexStats, count: int) -> tuple[int, int, int, int]:
        return (stats.rows, stats.total_tokens, count, self._generation)

    def contributions(self, postings: Postings, stats: bm25.IndexStats, count: int) -> np.ndarray:
        """The phrase's bm25 term in each of its rows for statistics `stats` and n = `count`
        (kept until they change)."""
        key = self._stats_key(stats, count)
        if postings.stats_key != key or postings.contributions is None:
            assert self._alive is not None and self._lengths is not None
            live = self._alive[postings.positions]
            idf = bm25.idf(stats.rows, count)
            values = bm25.contributions(
                idf, postings.frequencies, self._lengths[postings.positions], stats.avgdl
            )
            values[~live] = 0.0
            postings.contributions, postings.stats_key = values, key
        return postings.contributions

    def score(
        self,
        conn: apsw.Connection,
        match_phrases: Sequence[str],
        allowed: np.ndarray | None,
        readable: ReadableRows | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(chunk ids, scores) of every allowed row containing at least one phrase, in id
        order, scored exactly like `-bm25(chunk_fts, *weights)` of the OR of `match_phrases`:
        with the whole index's statistics, or with those of `readable` (its rows: see
        `readable_rows`; `allowed` must lie inside it). None when a phrase's frequencies could
        not be recovered exactly, which the readable statistics need (see _fill)."""
        index = fts.index_stats(conn)
        if readable is not None:
            return self._score_inside(conn, match_phrases, allowed, readable, index)
        rowids = self.rowids(conn)
        assert self._alive is not None
        total = len(rowids)
        mask = self._alive[:total].copy()
        if allowed is not None:
            mask[:] = False
            mask[present_positions(rowids, allowed)] = True
        score = np.zeros(total, dtype=np.float64)
        hit = np.zeros(total, dtype=bool)
        for phrase in match_phrases:  # in query order, as FTS5 sums them
            postings = self.postings(conn, phrase, index)
            if phrase not in self.row_counts:
                self.row_counts[phrase] = int(np.count_nonzero(self._alive[postings.positions]))
            contributions = self.contributions(postings, index, self.row_counts[phrase])
            positions = postings.positions
            keep = mask[positions]
            positions, contributions = positions[keep], contributions[keep]
            score[positions] += contributions
            hit[positions] = True
        found = np.flatnonzero(hit)
        return rowids[found], score[found]

    def _score_inside(
        self,
        conn: apsw.Connection,
        match_phrases: Sequence[str],
        allowed: np.ndarray | None,
        readable: ReadableRows,
        index: bm25.IndexStats,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """`score` for a caller who reads only some stores, with arrays the size of its readable
        set: each phrase's postings inside the set are found once per set (`inside`), so a
        search's work follows the caller's own rows, not every tenant's rows containing the
        phrase (the same floats: each contribution is computed element by element either way,
        then summed in query order)."""
        assert readable.ids is not None
        if readable.stats.rows == 0:  # nothing to read, nothing found
            return readable.ids[:0], np.zeros(0)
        size = len(readable.ids)
        mask = np.ones(size, dtype=bool)
        if allowed is not None:
            mask[:] = False
            mask[present_positions(readable.ids, allowed)] = True
        score = np.zeros(size, dtype=np.float64)
        hit = np.zeros(size, dtype=bool)
        for phrase in match_phrases:  # in query order, as FTS5 sums them
            inside = self.inside(conn, phrase, readable, index)
            if inside is None:
                return None
            keep = mask[inside.rows]
            rows = inside.rows[keep]
            score[rows] += inside.contributions[keep]
            hit[rows] = True
        found = np.flatnonzero(hit)
        return readable.ids[found], score[found]

    def inside(
        self, conn: apsw.Connection, phrase: str, readable: ReadableRows, index: bm25.IndexStats
    ) -> InsidePostings | None:
        """The phrase's postings inside a readable set of this index, with their bm25 terms for
        the set's statistics, kept with the set (which is dropped when the index changes). None
        when its frequencies could not be recovered exactly (see _fill)."""
        key = (id(readable), phrase)
        found = readable.inside.get(phrase)
        if found is not None:
            self._inside_order.move_to_end(key)
            return found
        assert readable.positions is not None and readable.lengths is not None
        own = _own_frequencies(conn, phrase, readable)
        if own is not None:  # the set's own rows (own_tokens.py): the index is not consulted
            rows = np.flatnonzero(own)
            frequencies = own[rows]
        else:
            postings = self.postings(conn, phrase, index)
            if not postings.solved:
                return None
            rows, where = _members(readable.positions, postings.positions)
            frequencies = postings.frequencies[where]
        count = readable.counts.setdefault(phrase, len(rows))
        idf = bm25.idf(readable.stats.rows, count)
        contributions = bm25.contributions(
            idf, frequencies, readable.lengths[rows], readable.stats.avgdl
        )
        found = readable.inside[phrase] = InsidePostings(rows.astype(np.int32), contributions)
        self._inside_order[key] = readable  # (holding the set keeps its id from being reused)
        self.inside_size += len(rows)
        while self.inside_size > MAX_INSIDE_POSTINGS and len(self._inside_order) > 1:
            (_, old_phrase), old_set = self._inside_order.popitem(last=False)
            self.inside_size -= len(old_set.inside.pop(old_phrase).rows)
        return found

    def forget_inside(self, dropped: ReadableRows | None = None) -> None:
        """Drop the postings kept inside a readable set the caller drops (None: every set, as
        when the index changes)."""
        for key, readable in list(self._inside_order.items()):
            if dropped is None or readable is dropped:
                self.inside_size -= len(readable.inside.pop(key[1]).rows)
                del self._inside_order[key]

    def count_in(self, phrase: str, readable: ReadableRows) -> int | None:
        """n of a phrase inside a readable set from its postings, if they are held."""
        if phrase in readable.inside:
            return len(readable.inside[phrase].rows)
        postings = self.phrases.get(phrase)
        # A set that finds phrases in its own rows never looks at postings others filled.
        if postings is None or readable.positions is None or readable.own is not None:
            return None
        return len(_members(readable.positions, postings.positions)[0])

    def readable_rows(self, conn: apsw.Connection, chunk_ids: np.ndarray) -> ReadableRows:
        """The readable set of these chunks (ascending; the live rows the index holds of them)
        with its statistics from the rows' lengths held here."""
        rowids = self.rowids(conn)
        assert self._alive is not None and self._lengths is not None
        positions = present_positions(rowids, chunk_ids)
        positions = positions[self._alive[positions]]
        lengths = self._lengths[positions]
        interval = None  # the set is every live row of one id range: n by FTS5 over the range
        if len(positions) and np.count_nonzero(
            self._alive[positions[0] : positions[-1] + 1]
        ) == len(positions):
            interval = (int(rowids[positions[0]]), int(rowids[positions[-1]]))
        return ReadableRows(
            stats_of(lengths), rowids[positions], lengths, interval, positions=positions
        )


def _members(rows: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of `positions` (ascending), those among `rows` (ascending): where each is in `rows`, and
    where it is in `positions`. A binary search per posting, not a mask over every row of the
    index."""
    at = np.searchsorted(rows, positions)
    found = at < len(rows)
    found[found] = rows[at[found]] == positions[found]
    return at[found], np.flatnonzero(found)


def _own_frequencies(
    conn: apsw.Connection, phrase: str, readable: ReadableRows
) -> np.ndarray | None:
    """The phrase's f in each row of a set that finds phrases in its own rows (None: it does
    not, or no longer does because its rows' text differs from the index)."""
    if readable.own is None:
        return None
    tokens = _phrase_tokens(phrase)
    if not tokens:
        return None
    found = readable.own.frequencies(conn, readable, [(phrase, tokens)])
    if found is None:
        readable.own = None
        return None
    return found[0]


def _phrase_tokens(phrase: str) -> tuple[str, ...]:
    """The index tokens of a quoted phrase (as kept: `"sqlite-vec"`)."""
    return query_tokens(phrase[1:-1].replace('""', '"') if phrase.startswith('"') else phrase)
