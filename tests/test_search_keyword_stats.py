"""Keyword statistics over the caller's readable set (kbmcp/search/lexical/stats.py).

bm25's N, average length and per-phrase n are those of the rows the caller may read. Checked
here against an independent reference: FTS5's own bm25() in a copy of the file whose index holds
only the readable rows (the other stores' rows deleted from chunk_fts), for every keyword source
(FTS5 recomputed, scope scan, postings) on random scopes and queries. When the caller reads every
store, the recomputed path equals FTS5's SQL bit for bit, pruning of common terms included. And
the issue's reproduction: a tenant's score for its own one-word memory does not move when other
tenants store that word.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np
import pytest

from kbmcp.access import KNOWLEDGE_READ, MEMORY_READ, Principal, readable
from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.engine import readable_stores
from kbmcp.search.lexical import channel
from kbmcp.search.lexical.channel import TOKENIZER, WEIGHTS
from kbmcp.search.models import MODES, SearchFilters, SearchRequest, SearchResponse
from kbmcp.search.query_text import match_expression, quote_term
from kbmcp.service import memories
from kbmcp.service.ingest import IngestOptions, add_paths, archive_document
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.store.sqlite.search.lexical import fts
from kbmcp.store.sqlite.search.lexical import postings as postings_module
from kbmcp.store.sqlite.search.lexical.fts import ensure_vocabulary, fts_source
from kbmcp.store.sqlite.search.lexical.own_tokens import OwnTokens
from kbmcp.store.sqlite.search.lexical.postings import PostingsIndex
from kbmcp.store.sqlite.search.lexical.readable_fts import readable_fts_source
from kbmcp.store.sqlite.search.lexical.scan import rows_containing, scan_scope
from kbmcp.store.sqlite.search.lexical.stats import (
    ReadableRows,
    chunks_of_stores,
    indexed_rows,
    readable_rows,
    stats_of,
    varint_sums,
    varint_values,
)
from kbmcp.store.sqlite.search.lexical.tokens import TokenCache
from kbmcp.store.sqlite.search.ranking import ChannelSource, rank
from kbmcp.store.tokenizer import query_tokens
from kbmcp.workspace import Workspace
from tests.mcp_support import hash_workspace, write

WORDS = (  # noqa: SIM905 - a word list reads better as text
    "the of and to in is vector index scope search keys token rotate backup sqlite-vec what's "
    "running runs ran café résumé zebra crossing alpha beta gamma delta epsilon"
).split()
PHRASES = ["zebra crossing", "of the", "vector index", "the absent"]

FTS5_SCORES = """
SELECT rowid, -bm25(chunk_fts, ?, ?, ?) FROM chunk_fts
WHERE chunk_fts MATCH ? AND +rowid IN carray(?)
"""


def _documents(rng: random.Random, count: int, words: list[str]) -> dict[str, str]:
    files = {}
    for i in range(count):
        title = " ".join(rng.choices(words, k=rng.randint(1, 3)))
        sections = []
        for _ in range(rng.randint(1, 3)):
            heading = " ".join(rng.choices(words, k=2))
            sections.append(f"## {heading}\n\n{' '.join(rng.choices(words, k=rng.randint(3, 90)))}")
        body = "\n\n".join(sections)
        files[f"d{i:03d}.md"] = f"# {title}\n\n{body}\n"
    return files


@dataclass
class TwoTenants:
    db: Path
    # Readable sets: acme's stores (its rows are not one id range: one of beta's memories lies
    # among them) and acme's "ops" alone (one id range).
    sets: dict[str, tuple[int, ...]]
    acme: Principal


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory) -> TwoTenants:
    """acme (two knowledge bases, memories) and beta (a knowledge base heavy in the same words,
    with different frequencies, and memories); edited and archived rows in the index."""
    root = tmp_path_factory.mktemp("two_tenants")
    db = root / "kb.db"
    rng = random.Random(3)
    heavy = [*WORDS, *(["zebra", "index", "the", "vector"] * 6)]

    def remember(principal: Principal, name: str, i: int) -> None:
        text = " ".join(rng.choices(heavy if name == "beta" else WORDS, k=12))
        memories.remember(ws, principal, f"{name} memory {i}: {text}")

    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        for tenant in ("acme", "beta"):
            create_tenant(ws, admin, tenant)
        acme, beta = act_as_tenant(ws, admin, "acme"), act_as_tenant(ws, admin, "beta")
        for principal, kb, count, words in (
            (acme, "ops", 40, WORDS),
            (acme, "notes", 15, WORDS),
            (beta, "beta-docs", 60, heavy),
        ):
            if kb == "beta-docs":
                for i in range(8):
                    remember(acme, "acme", i)
            folder = write(root / kb, _documents(rng, count, words))
            add_paths(ws, principal, [folder], IngestOptions(knowledge_base=kb))
            write(folder, _documents(random.Random(kb), count // 3, words))  # rewrite some
            add_paths(ws, principal, [folder], IngestOptions(knowledge_base=kb))
            if kb == "ops":
                remember(beta, "beta", 0)
        for i in range(1, 8):
            remember(beta, "beta", i)
        first = ws.conn.execute(
            "SELECT d.public_id FROM document AS d JOIN knowledge_base AS kb "
            "ON kb.id = d.knowledge_base_id WHERE kb.name = 'ops' ORDER BY d.id LIMIT 1"
        ).fetchone()[0]
        archive_document(ws, acme, first)
        caller = Principal(
            acme.tenant_id, acme.tenant_public_id, scopes=frozenset({KNOWLEDGE_READ, MEMORY_READ})
        )
        stores = readable_stores(ws.store, ws.conn, readable(ws.store, ws.conn, caller))
        assert not stores.every_store
        ops = ws.conn.execute("SELECT id FROM knowledge_base WHERE name = 'ops'").fetchone()[0]
        sets = {"acme": stores.store_ids, "ops": (ops,)}
        # One set is a range of ids, the other is not: both forms of ReadableRows are tested.
        assert readable_rows(ws.conn, sets["ops"]).interval is not None
        assert readable_rows(ws.conn, sets["acme"]).interval is None
    return TwoTenants(db, sets, caller)


@pytest.fixture(scope="module")
def readable_only_index(
    two_tenants: TwoTenants, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Per readable set, a copy of the file whose FTS5 index holds only that set's rows: FTS5's
    own statistics there are the set's, by construction."""
    with hash_workspace(two_tenants.db) as ws:
        ws.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copies = {}
    for name, stores in two_tenants.sets.items():
        copy = tmp_path_factory.mktemp(f"reference_{name}") / "kb.db"
        shutil.copyfile(two_tenants.db, copy)
        conn = apsw.Connection(str(copy))
        with conn:
            readable_ids = set(chunks_of_stores(conn, stores).tolist())
            every = [row[0] for row in conn.execute("SELECT id FROM chunk_fts_docsize")]
            for rowid in every:
                if rowid not in readable_ids:
                    conn.execute("DELETE FROM chunk_fts WHERE rowid = ?", (rowid,))
        conn.close()
        copies[name] = copy
    return copies


def _explicit(conn: apsw.Connection, stores: tuple[int, ...]) -> ReadableRows:
    """The set as its rows (never as an id range)."""
    ids, lengths = indexed_rows(conn, chunks_of_stores(conn, stores))
    return ReadableRows(stats_of(lengths), ids, lengths)


def _cases(ids: np.ndarray, count: int, seed: int) -> list[tuple[list[str], np.ndarray]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        terms = list(dict.fromkeys(rng.choices([*WORDS, *PHRASES, "absent", "Keys"], k=7)))
        size = rng.choice([1, 3, 10, 40, len(ids)])
        allowed = np.sort(np.asarray(rng.sample(list(ids), min(size, len(ids))), dtype=np.int64))
        cases.append((terms, allowed))
    return cases


def _fts5(conn: apsw.Connection, terms: list[str], allowed: np.ndarray) -> dict[int, float]:
    rows = conn.execute(
        FTS5_SCORES, (*WEIGHTS, match_expression(terms), apsw.carray(allowed))
    ).fetchall()
    return dict(rows)


def _ranked(conn: apsw.Connection, source: ChannelSource, allowed: np.ndarray, depth: int) -> list:
    ranking = rank(
        conn, scope_ids=allowed, lexical=source, semantic=ChannelSource.off(), mode="lexical",
        alpha=0.5, rrf_k=60, depth=depth, limit=depth,
    )  # fmt: skip
    rows = [(r.chunk_id, r.lexical_rank, r.lexical_score) for r in ranking.rows]
    return [rows, ranking.lexical_found, source.strategy]


def test_varint_sums_decode_like_sqlite() -> None:
    rng = np.random.default_rng(1)
    blobs, expected = [], []
    for _ in range(300):
        values = [int(v) for v in rng.integers(0, 2**40, rng.integers(1, 5)) >> rng.integers(0, 40)]
        blob = b"".join(_varint(v) for v in values)
        assert fts.decode_varints(blob) == values
        blobs.append(blob)
        expected.append(sum(values))
    assert varint_sums(blobs).tolist() == expected
    assert varint_values(b"".join(blobs)).tolist() == [
        value for blob in blobs for value in fts.decode_varints(blob)
    ]


def _varint(value: int) -> bytes:
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(reversed(groups))


def test_statistics_of_every_store_are_the_index_own(two_tenants: TwoTenants) -> None:
    """The two definitions give the same integers when the caller reads everything, so
    switching between them never changes a score."""
    with Workspace(
        Settings(db=two_tenants.db, embedder="hash"), embedder=HashingEmbedder(),
        long_lived=True,
    ) as ws:  # fmt: skip
        conn = ws.conn
        ensure_vocabulary(conn)
        every = tuple(row[0] for row in conn.execute("SELECT id FROM knowledge_base ORDER BY id"))
        with conn:
            plain = readable_rows(conn, every)
            assert plain.interval is not None  # every row: one id range
            assert ws.accelerator is not None and ws.accelerator.refresh(conn)
            held = ws.accelerator.readable_rows(conn, every)
            index = fts.index_stats(conn)
            terms = [*WORDS, *PHRASES, "absent"]
            phrases = [(t, query_tokens(t)) for t in terms]
            whole = rows_containing(conn, phrases, {})
            for rows in (plain, held, _explicit(conn, every)):
                assert rows.stats == index
                assert rows.stats.avgdl == index.avgdl
                assert rows.containing(conn, terms) == whole


def test_recomputed_fts5_equals_fts5_sql_when_the_caller_reads_everything(
    two_tenants: TwoTenants, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The readable-set source, given every row, ranks exactly as FTS5's bm25() SQL: the same
    chunks, ranks and scores bit for bit, with common terms pruned or not."""
    with hash_workspace(two_tenants.db) as ws:
        conn = ws.conn
        ensure_vocabulary(conn)
        every = tuple(row[0] for row in conn.execute("SELECT id FROM knowledge_base ORDER BY id"))
        with conn:
            ids = _explicit(conn, every).ids
            assert ids is not None
            for min_rows in (0, 10**9):  # pruning of common terms on and off
                monkeypatch.setattr(channel, "STOPWORD_MIN_ROWS", min_rows)
                for terms, allowed in _cases(ids, 40, seed=min_rows):
                    for depth in (3, 50):
                        want = _ranked(conn, fts_source(conn, terms, len(allowed), depth),
                                       allowed, depth)  # fmt: skip
                        for everything in (readable_rows(conn, every), _explicit(conn, every)):
                            got = readable_fts_source(conn, terms, allowed, everything, depth)
                            assert _ranked(conn, got, allowed, depth) == want


@pytest.mark.parametrize("name", ["acme", "ops"])
def test_every_source_scores_with_the_readable_set_statistics(
    two_tenants: TwoTenants, readable_only_index: dict[str, Path], name: str
) -> None:
    """A readable set's scores on the shared file, from each keyword source and both forms of
    the set, equal FTS5's bm25() in the copy that indexes the set's rows alone."""
    stores = two_tenants.sets[name]
    reference = apsw.Connection(str(readable_only_index[name]))
    with Workspace(
        Settings(db=two_tenants.db, embedder="hash"), embedder=HashingEmbedder(),
        long_lived=True,
    ) as ws:  # fmt: skip
        conn = ws.conn
        ensure_vocabulary(conn)
        accelerator = ws.accelerator
        assert accelerator is not None
        tokenizer = conn.fts5_tokenizer(*TOKENIZER)
        compared = 0
        with conn:
            assert accelerator.refresh(conn)
            held = accelerator.readable_rows(conn, stores)
            explicit = _explicit(conn, stores)
            assert explicit.ids is not None and held.ids is not None
            assert explicit.ids.tolist() == held.ids.tolist()
            assert explicit.stats == held.stats == fts.index_stats(reference)
            assert readable_rows(conn, stores).stats == explicit.stats
            assert (held.interval is None) == (name == "acme")
            postings = PostingsIndex(WEIGHTS)
            for terms, allowed in _cases(explicit.ids, 30, seed=7):
                want = _fts5(reference, terms, allowed)
                phrases = [(t, query_tokens(t)) for t in terms]
                got = []
                for rows in (readable_rows(conn, stores), _explicit(conn, stores)):
                    scanned = scan_scope(conn, phrases, allowed, WEIGHTS, tokenizer, TokenCache(),
                                         readable=rows)  # fmt: skip
                    source = readable_fts_source(conn, terms, allowed, rows, 10**6)
                    got += [scanned, _bound_pairs(source)]  # every hit: the depth exceeds them
                scored = postings.score(
                    conn, [quote_term(t) for t in terms], allowed,
                    postings.readable_rows(conn, explicit.ids),
                )  # fmt: skip
                # A set scored from its own rows' tokens fills no postings of the whole index.
                fresh = PostingsIndex(WEIGHTS)
                own = fresh.readable_rows(conn, explicit.ids)
                own.own = OwnTokens(TokenCache())
                scored_own = fresh.score(conn, [quote_term(t) for t in terms], allowed, own)
                assert own.own is not None and not fresh.phrases
                assert own.containing(conn, terms) == explicit.containing(conn, terms)
                for ids, scores in [*got, scored, scored_own]:
                    found = zip(np.asarray(ids).tolist(), np.asarray(scores).tolist(), strict=True)
                    assert dict(found) == want  # bit for bit
                    compared += len(want)
        assert compared > 500
    reference.close()


def test_the_postings_kept_inside_readable_sets_stay_within_their_budget(
    two_tenants: TwoTenants,
    readable_only_index: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each phrase's postings inside a readable set are kept with the set (postings.py
    `inside`), least recently used evicted beyond MAX_INSIDE_POSTINGS pairs over every set:
    with a budget of a few phrases' postings, scores stay FTS5's bit for bit while entries come
    and go, and dropping a set drops its entries."""
    monkeypatch.setattr(postings_module, "MAX_INSIDE_POSTINGS", 60)
    reference = {name: apsw.Connection(str(path)) for name, path in readable_only_index.items()}
    with hash_workspace(two_tenants.db) as ws, ws.conn:
        conn = ws.conn
        postings = PostingsIndex(WEIGHTS)
        sets = {name: postings.readable_rows(conn, _explicit(conn, stores).ids)
                for name, stores in two_tenants.sets.items()}  # fmt: skip
        largest = evicted = 0
        for _ in range(2):  # the second round finds some phrases evicted, others kept
            for name, held in sets.items():
                assert held.ids is not None
                for terms, allowed in _cases(held.ids, 15, seed=11):
                    before = len(held.inside)
                    scored = postings.score(conn, [quote_term(t) for t in terms], allowed, held)
                    assert scored is not None
                    found = zip(scored[0].tolist(), scored[1].tolist(), strict=True)
                    assert dict(found) == _fts5(reference[name], terms, allowed)
                    largest = max([largest, *(len(e.rows) for e in held.inside.values())])
                    kept = sum(len(e.rows) for r in sets.values() for e in r.inside.values())
                    assert kept == postings.inside_size <= max(60, largest)
                    evicted += before + len(terms) > len(held.inside)
        assert evicted and sets["ops"].inside  # (the set scored last)
        acme = dict(sets["acme"].inside)
        postings.forget_inside(sets["ops"])
        assert not sets["ops"].inside and sets["acme"].inside == acme
        assert postings.inside_size == sum(len(entry.rows) for entry in acme.values())
        postings.forget_inside()
        assert postings.inside_size == 0 and not sets["acme"].inside
    for connection in reference.values():
        connection.close()


def _bound_pairs(source: ChannelSource) -> tuple[list[int], list[float]]:
    import json

    pairs = json.loads(source.params["lexical_candidates"])
    return [int(i) for i, _ in pairs], [float(s) for _, s in pairs]


# ---------------------------------------------------------------- through the service


@pytest.fixture
def word_file(tmp_path: Path) -> Iterator[tuple[Path, Principal]]:
    db = tmp_path / "kb.db"
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        create_tenant(ws, admin, "acme")
        create_tenant(ws, admin, "beta")
        acme = act_as_tenant(ws, admin, "acme")
        beta = act_as_tenant(ws, admin, "beta")
        memories.remember(ws, acme, "zanzibar")
        memories.remember(ws, beta, "Nothing to see here.")  # beta's store exists from the start
    yield db, acme


def _scores(db: Path, principal: Principal) -> list[tuple[str, list]]:
    settings = Settings(db=db, embedder="hash")
    out = []
    for long_lived in (True, False):
        with Workspace(settings, embedder=HashingEmbedder(), long_lived=long_lived) as ws:
            for mode in ("lexical", "hybrid"):
                response = search(ws, principal, SearchRequest("zanzibar", mode=mode))
                out.append((mode, _fields(response)))
    return out


def _fields(response: SearchResponse) -> dict:
    stats = dict(vars(response.stats), elapsed_ms=None)
    return {"results": [vars(r) for r in response.results], "stats": stats}


def test_a_score_does_not_count_other_tenants_chunks(word_file: tuple[Path, Principal]) -> None:
    """The issue's reproduction: a one-word memory's lexical score used to fall as other
    tenants stored the word (4.03 with none, 3.15 with one foreign chunk, 2.53 with two)."""
    db, acme = word_file
    before = _scores(db, acme)
    assert before[0][1]["results"][0]["lexical_score"] > 0
    with hash_workspace(db) as ws:
        beta = act_as_tenant(ws, ws.local_principal(), "beta")
        for i in range(2):
            memories.remember(ws, beta, f"zanzibar, beta's secret number {i}")
            assert _scores(db, acme) == before
        folder = write(db.parent / "beta", {"z.md": "# Zanzibar\n\nzanzibar zanzibar\n"})
        add_paths(ws, beta, [folder], IngestOptions(knowledge_base="beta-docs"))
    assert _scores(db, acme) == before


@pytest.mark.parametrize("mode", MODES)
def test_another_tenants_first_store_changes_nothing(tmp_path: Path, mode: str) -> None:
    """A caller that reads every store is searched without an allow-list and with the index's
    own statistics; once another tenant has a store it is not, and still every field of its
    results (strategies and stats included) stays the same."""
    db = tmp_path / "kb.db"
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        create_tenant(ws, admin, "beta")
        folder = write(tmp_path / "mine", _documents(random.Random(1), 12, WORDS))
        add_paths(ws, admin, [folder], IngestOptions(knowledge_base="mine"))
        memories.remember(ws, admin, "zebra crossing of the vector index")
    queries = ["zebra crossing the index", '"vector index" rotate', "of the"]

    def responses() -> list[dict]:
        out = []
        for long_lived in (True, False):
            with Workspace(
                Settings(db=db, embedder="hash"), embedder=HashingEmbedder(),
                long_lived=long_lived,
            ) as ws:  # fmt: skip
                owner = ws.local_principal()
                for query in queries:
                    out.append(_fields(search(ws, owner, SearchRequest(query, mode=mode))))
        return out

    before = responses()
    with hash_workspace(db) as ws:
        beta = act_as_tenant(ws, ws.local_principal(), "beta")
        folder = write(tmp_path / "theirs", _documents(random.Random(2), 30, WORDS))
        add_paths(ws, beta, [folder], IngestOptions(knowledge_base="theirs"))
        memories.remember(ws, beta, "zebra zebra zebra crossing")
    assert responses() == before


def test_another_tenants_queries_do_not_change_a_strategy(tmp_path: Path) -> None:
    """The plan uses the postings for a small scope when they hold every term, but only
    postings that requests over the same readable set used: else `lexical_strategy` would tell
    a caller which words another tenant searched for since the last write."""
    db = tmp_path / "kb.db"
    with hash_workspace(db) as ws:
        admin = ws.local_principal()
        for tenant in ("acme", "beta"):
            create_tenant(ws, admin, tenant)
            folder = write(tmp_path / tenant, _documents(random.Random(tenant), 10, WORDS))
            add_paths(ws, act_as_tenant(ws, admin, tenant), [folder],
                      IngestOptions(knowledge_base=f"{tenant}-docs"))  # fmt: skip
    query = SearchRequest("zebra crossing", mode="lexical", filters=SearchFilters(
        document_paths=["d001.md"]))  # fmt: skip
    with Workspace(
        Settings(db=db, embedder="hash"), embedder=HashingEmbedder(), long_lived=True
    ) as ws:
        acme = act_as_tenant(ws, ws.local_principal(), "acme")
        beta = act_as_tenant(ws, ws.local_principal(), "beta")
        alone = search(ws, acme, query).stats.lexical_strategy
        assert alone == "scan"
        unscoped = SearchRequest("zebra crossing", mode="lexical")
        assert search(ws, beta, unscoped).stats.lexical_strategy == "postings"
        assert search(ws, acme, query).stats.lexical_strategy == alone
        # acme's own unscoped search makes its next small-scope search use the postings.
        search(ws, acme, unscoped)
        assert search(ws, acme, query).stats.lexical_strategy == "postings"
