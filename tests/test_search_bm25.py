"""The keyword channel's accelerated sources must score exactly like FTS5's own bm25().

Both the Python bm25 over a small scope (lexical/scan.py) and the per-term impact index
(lexical/postings.py) are compared with `-bm25(chunk_fts, 2, 1.5, 1)` of the OR query, on a corpus
ingested through the real pipeline, then edited and re-ingested (so the contentless index holds
deleted rows) with one document archived, for random scopes and queries that include phrases
(`sqlite-vec`, `what's`, quoted ones such as `"zebra crossing"`), repeated words, title and
heading words and absent words.
"""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.lexical import channel
from kbmcp.search.lexical.channel import TOKENIZER, WEIGHTS
from kbmcp.search.query_text import match_expression, quote_term
from kbmcp.service.ingest import archive_document
from kbmcp.store.sqlite.search.lexical.fts import ensure_vocabulary, fts_source
from kbmcp.store.sqlite.search.lexical.postings import PostingsIndex
from kbmcp.store.sqlite.search.lexical.scan import _phrase_starts, scan_scope
from kbmcp.store.sqlite.search.lexical.tokens import TokenCache
from kbmcp.store.sqlite.search.ranking import ChannelSource, bound, rank
from kbmcp.store.sqlite.search.top_k import top_k
from kbmcp.store.tokenizer import query_tokens
from kbmcp.workspace import Workspace
from tests.search_corpus import ingest

WORDS = (  # noqa: SIM905 - a word list reads better as text
    "the of and to in is vector index scope search keys token rotate backup sqlite-vec what's "
    "running runs ran café cafe résumé zebra crossing alpha beta gamma delta epsilon"
).split()

# Quoted phrases of the query (search/query_text.py): adjacent words, common ones among them.
PHRASES = ["zebra crossing", "of the", "vector index scope", "RUNNING runs", "the absent"]

FTS5_SCORES = """
SELECT rowid, -bm25(chunk_fts, ?, ?, ?) FROM chunk_fts
WHERE chunk_fts MATCH ? AND +rowid IN carray(?)
"""


def _write(folder: Path, rng: random.Random, docs: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(docs):
        title = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        sections = []
        for _ in range(rng.randint(1, 4)):
            heading = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
            body = " ".join(rng.choices(WORDS, k=rng.randint(5, 120)))
            sections.append(f"## {heading}\n\n{body}\n")
        (folder / f"d{i:03d}.md").write_text(f"# {title}\n\n" + "\n".join(sections))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("bm25")
    ws = Workspace(
        Settings(db=root / "kb.db", embedder="hash"),
        embedder=HashingEmbedder(),
        long_lived=True,
    )
    rng = random.Random(5)
    _write(root / "docs", rng, 80)
    ingest(ws, root / "docs")
    _write(root / "docs", random.Random(6), 30)  # rewrite 30 documents: deletes in the index
    ingest(ws, root / "docs")
    doc = ws.conn.execute("SELECT public_id FROM document ORDER BY id LIMIT 1").fetchone()[0]
    archive_document(ws, ws.local_principal(), doc)
    ensure_vocabulary(ws.conn)
    return ws


def _indexed(conn: apsw.Connection) -> np.ndarray:
    rows = conn.execute("SELECT id FROM chunk_fts_docsize ORDER BY id").fetchall()
    return np.array([r[0] for r in rows], dtype=np.int64)


def _fts5(conn: apsw.Connection, terms: list[str], allowed: np.ndarray) -> dict[int, float]:
    match = match_expression(terms)
    rows = conn.execute(FTS5_SCORES, (*WEIGHTS, match, apsw.carray(allowed))).fetchall()
    return dict(rows)


def _cases(conn: apsw.Connection, count: int) -> list[tuple[list[str], np.ndarray]]:
    rng = random.Random(11)
    indexed = _indexed(conn)
    cases = []
    for _ in range(count):
        terms = list(dict.fromkeys(rng.choices([*WORDS, *PHRASES, "absent", "Keys"], k=8)))
        size = rng.choice([1, 3, 10, 50, len(indexed)])
        allowed = np.sort(rng.sample(list(indexed), min(size, len(indexed))))
        cases.append((terms, np.asarray(allowed, dtype=np.int64)))
    return cases


def test_python_bm25_equals_fts5_on_random_scopes(corpus: Workspace) -> None:
    conn = corpus.conn
    tokenizer = conn.fts5_tokenizer(*TOKENIZER)
    compared = 0
    for terms, allowed in _cases(conn, 60):
        phrases = [(t, query_tokens(t)) for t in terms]
        got = scan_scope(conn, phrases, allowed, WEIGHTS, tokenizer, TokenCache())
        assert got is not None
        want = _fts5(conn, terms, allowed)
        ids, scores = got
        assert sorted(want) == ids.tolist()
        for chunk_id, score in zip(ids.tolist(), scores.tolist(), strict=True):
            assert score == want[chunk_id]  # bit for bit
            compared += 1
    assert compared > 500


def test_postings_equal_fts5_on_random_scopes(corpus: Workspace) -> None:
    conn = corpus.conn
    postings = PostingsIndex(WEIGHTS)
    for terms, allowed in _cases(conn, 60):
        ids, scores = postings.score(conn, [quote_term(t) for t in terms], allowed)
        want = _fts5(conn, terms, allowed)
        assert sorted(want) == ids.tolist()
        # Sums of FTS5's own per-phrase terms in query order: the same floats, bit for bit.
        assert scores.tolist() == [want[i] for i in ids.tolist()]


def test_every_source_gives_the_same_ranking(
    corpus: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5 SQL, the scope scan and the postings, each fed into the ranking statement, give the
    same chunks, ranks and scores (ranking.py: one statement whatever the source)."""
    conn = corpus.conn
    monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", 10**9)
    tokenizer = conn.fts5_tokenizer(*TOKENIZER)
    postings = PostingsIndex(WEIGHTS)
    depth = 20
    for terms, allowed in _cases(conn, 30):
        phrases = [(t, query_tokens(t)) for t in terms]
        scanned = scan_scope(conn, phrases, allowed, WEIGHTS, tokenizer, TokenCache())
        assert scanned is not None
        sources = [
            fts_source(conn, terms, len(allowed), depth),
            bound("lexical_candidates", "scan", *top_k(*scanned, depth + 1)[:2]),
            bound(
                "lexical_candidates",
                "postings",
                *top_k(*postings.score(conn, [quote_term(t) for t in terms], allowed), depth + 1)[
                    :2
                ],
            ),
        ]
        results = []
        for source in sources:
            ranking = rank(
                conn,
                scope_ids=allowed,
                lexical=source,
                semantic=ChannelSource.off(),
                mode="lexical",
                alpha=0.5,
                rrf_k=60,
                depth=depth,
                limit=depth,
            )
            rows = [(r.chunk_id, r.lexical_rank, r.lexical_score, r.score) for r in ranking.rows]
            results.append((rows, ranking.lexical_found))
        assert results[0] == results[1] == results[2]


def test_scan_refuses_when_the_index_holds_other_text(corpus: Workspace) -> None:
    conn = corpus.conn
    allowed = _indexed(conn)[:5]
    tokenizer = conn.fts5_tokenizer(*TOKENIZER)
    phrases = [("zebra", ("zebra",))]
    assert scan_scope(conn, phrases, allowed, WEIGHTS, tokenizer, TokenCache()) is not None
    with conn:
        conn.execute("UPDATE chunk SET text = text || ' extra words' WHERE id = ?",
                     (int(allowed[0]),))  # fmt: skip
        try:
            assert scan_scope(conn, phrases, allowed, WEIGHTS, tokenizer, TokenCache()) is None
        finally:
            conn.execute("UPDATE chunk SET text = substr(text, 1, length(text) - 12) "
                         "WHERE id = ?", (int(allowed[0]),))  # fmt: skip


def test_postings_follow_writes_in_place_and_stay_exact(tmp_path: Path) -> None:
    """A server's postings, filled for many phrases, then documents added, rewritten and archived
    by another connection: the accelerator updates them in place (no phrase fetched again) and
    every score still equals FTS5's bm25() bit for bit."""
    settings = Settings(db=tmp_path / "kb.db", embedder="hash")
    server = Workspace(settings, embedder=HashingEmbedder(), long_lived=True)
    writer = Workspace(settings, embedder=HashingEmbedder())
    try:
        _write(tmp_path / "docs", random.Random(1), 40)
        ingest(server, tmp_path / "docs")
        accelerator = server.accelerator
        assert accelerator is not None
        conn = server.conn
        ensure_vocabulary(conn)
        cases = _cases(conn, 20)
        with conn:
            accelerator.refresh(conn)
            for terms, allowed in cases:
                accelerator.postings.score(conn, [quote_term(t) for t in terms], allowed)
        postings = accelerator.postings
        kept = dict(postings.phrases)
        assert len(kept) > 20
        _write(tmp_path / "docs", random.Random(2), 15)  # rewrite 15 documents
        _write(tmp_path / "more", random.Random(3), 10)  # and add 10
        ingest(writer, tmp_path / "docs")
        ingest(writer, tmp_path / "more", kb="more")
        archived = writer.conn.execute("SELECT public_id FROM document ORDER BY id LIMIT 1")
        archive_document(writer, writer.local_principal(), archived.fetchone()[0])
        fetched = []
        original = postings._fill
        postings._fill = lambda *a: fetched.append(a[1]) or original(*a)  # type: ignore[method-assign]
        with conn:
            accelerator.refresh(conn)
            assert accelerator.postings is postings  # updated, not dropped
            indexed = _indexed(conn)
            for terms, _ in cases:
                for allowed in (indexed, np.ascontiguousarray(indexed[::3])):
                    ids, scores = postings.score(conn, [quote_term(t) for t in terms], allowed)
                    want = _fts5(conn, terms, allowed)
                    assert sorted(want) == ids.tolist()
                    assert scores.tolist() == [want[i] for i in ids.tolist()]
        assert [p for p in fetched if p in kept] == []
    finally:
        writer.close()
        server.close()


def test_phrase_starts_from_hits_equal_a_plain_scan() -> None:
    """The scan finds phrases from the tokens of any phrase only (`hits`); the reference tries
    every token index. Random codes with many repeats, phrases of one to three tokens, phrases
    that cross a text boundary and phrases longer than what is left."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        size = int(rng.integers(0, 40))
        codes = rng.integers(-1, 3, size=size).astype(np.int32)
        text_of = np.sort(rng.integers(0, 4, size=size)).astype(np.int64)
        phrase = [int(c) for c in rng.integers(0, 3, size=int(rng.integers(1, 4)))]
        expected = [
            i
            for i in range(size - len(phrase) + 1)
            if all(codes[i + k] == c and text_of[i + k] == text_of[i] for k, c in enumerate(phrase))
        ]
        hits = np.flatnonzero(codes >= 0)
        assert _phrase_starts(codes, text_of, phrase, hits).tolist() == expected
