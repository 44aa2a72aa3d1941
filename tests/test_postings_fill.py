"""A server fills a word's keyword postings from its occurrences, not from a bm25 per row.

The first use of a word fills its postings over the whole index (postings.py). On real text
(100k abstracts, long questions: bench/search.py --corpus scifact) that fill was most of an
unscoped hybrid search: FTS5's single-phrase bm25 reads each matching row's size record and
hands Python a row per posting. A single word's postings now come from fts5vocab's 'instance'
table, read as two strings; FTS5's f is the sum of one column weight per occurrence, so the
scores stay FTS5's bit for bit (test_search_bm25.py compares every source with FTS5 itself).
"""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import bm25
from kbmcp.search.lexical.channel import WEIGHTS
from kbmcp.service.ingest import archive_document
from kbmcp.store.sqlite.search.lexical import fts
from kbmcp.store.sqlite.search.lexical.postings import PostingsIndex
from kbmcp.store.tokenizer import query_tokens
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest

WORDS = [
    "the",
    "of",
    "and",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "rotate",
    "keys",
    "café",
    "résumé",
    "running",
    "runs",
]
# The engine's weights (equal: f is the weight times the occurrences, no column read), and
# weights on the 1/1024 grid that differ (each occurrence's column is read).
WEIGHT_CASES = (WEIGHTS, (2.0, 0.5, 1.0))


def _write(folder: Path, rng: random.Random, docs: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(docs):
        title = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        heading = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        body = " ".join(rng.choices(WORDS, k=rng.randint(5, 80)))
        (folder / f"d{i:03d}.md").write_text(f"# {title}\n\n## {heading}\n\n{body}\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("fill")
    ws = Workspace(Settings(db=root / "kb.db", embedder="hash"), embedder=HashingEmbedder(),
                   long_lived=True)  # fmt: skip
    _write(root / "docs", random.Random(3), 300)
    ingest(ws, root / "docs")
    _write(root / "docs", random.Random(4), 60)  # rewritten documents: deleted index rows
    ingest(ws, root / "docs")
    doc = ws.conn.execute("SELECT public_id FROM document ORDER BY id LIMIT 1").fetchone()[0]
    archive_document(ws, ws.local_principal(), doc)
    return ws


@pytest.mark.parametrize("weights", WEIGHT_CASES)
def test_a_word_is_filled_with_a_row_per_fill_not_per_posting(
    server: Workspace, weights: tuple[float, float, float]
) -> None:
    conn = server.conn
    postings = PostingsIndex(weights)
    postings.rowids(conn)  # the index's rows, read once for every phrase
    returned = []

    def count(cursor: apsw.Cursor, row: apsw.SQLiteValues) -> apsw.SQLiteValues:
        returned.append(row)
        return row

    conn.row_trace = count
    try:
        with conn:
            filled = postings.postings(conn, '"the"', fts.index_stats(conn))
    finally:
        conn.row_trace = None
    assert len(filled.positions) > 250  # nearly every row holds "the"
    assert len(returned) <= 2  # (before: a row per posting, 250+)


@pytest.mark.parametrize("weights", WEIGHT_CASES)
def test_occurrences_give_fts5s_frequencies_and_contributions(
    server: Workspace, weights: tuple[float, float, float]
) -> None:
    """Every word, and a word absent from the index: the postings from occurrences equal the
    ones solved from FTS5's own bm25 (rows, f), and so do the contributions computed from them,
    bit for bit, with the index's statistics after deletes."""
    conn = server.conn
    postings = PostingsIndex(weights)
    with conn:
        stats = fts.index_stats(conn)
        for word in [*WORDS, "absent"]:
            for token in query_tokens(word):
                counted = postings._fill_from_instances(conn, token)
                solved = postings._fill_from_bm25(conn, f'"{word}"', stats)
                assert counted is not None
                assert counted.positions.tolist() == solved.positions.tolist(), word
                assert counted.frequencies.tolist() == solved.frequencies.tolist(), word
                assert solved.solved
                lengths = postings._lengths[counted.positions]
                idf = bm25.idf(stats.rows, len(counted.positions))
                assert np.array_equal(
                    bm25.contributions(idf, counted.frequencies, lengths, stats.avgdl),
                    solved.contributions,
                ), word
