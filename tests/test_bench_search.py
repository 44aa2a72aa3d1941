"""bench/search.py still builds its corpus on the current schema and searches it exactly.

The latency tables of docs/search.md and docs/scale-out.md come from this script; its builders
write the store's rows themselves (for speed), so a migration that adds a column (as migration 11
gave `document_tag` its store) breaks them silently until the next long run. Here the script
runs end to end on a corpus of 200 chunks (2,000 words), on an SQLite file and on PostgreSQL
(its bulk builder), with every scope kind, and each cell must report exact recall against the
brute force.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.store.postgres.connection import connect
from kbmcp.workspace import Workspace
from tests import processes
from tests.store_backends import is_postgres

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH = REPO_ROOT / "bench" / "search.py"
SMALL_RUN = ["--chunks", "200", "--vocabulary", "2000", "--queries", "2", "--warmup", "1",
             "--modes", "hybrid", "--filters", "tag,meta,path"]  # fmt: skip
# A result row: mode, scope label ("unscoped", "tag 0.1%", ...), k, p50, p95, recall@k.
ROW = re.compile(
    r"^hybrid\s+(unscoped|(?:tag|meta|path) [\d.]+%)\s+10\s+[\d.]+\s+[\d.]+\s+([\d.]+)"
)


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, str(BENCH), *SMALL_RUN, *args],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def cells(done: subprocess.CompletedProcess[str]) -> list[tuple[str, float]]:
    assert done.returncode == 0, done.stderr[-3000:]
    return [(m[1], float(m[2])) for m in map(ROW.match, done.stdout.splitlines()) if m]


def test_the_bench_builds_and_searches_every_scope_exactly(
    backend_db: Path | str, tmp_path: Path
) -> None:
    where = (
        ["--db", str(backend_db), "--postgres-only"]
        if is_postgres(backend_db)
        else ["--db", str(tmp_path / "bench.db")]
    )
    rows = cells(run_bench(*where))
    labels = [label for label, _ in rows]
    assert labels[0] == "unscoped"
    for kind in ("tag", "meta", "path"):
        assert [label for label in labels if label.startswith(kind)] == [
            f"{kind} 0.1%",
            f"{kind} 1%",
            f"{kind} 10%",
        ]
    assert all(recall == pytest.approx(1.0) for _, recall in rows), rows
    # Reused with another vocabulary (the same count of documents), the corpus is refused:
    # queries drawn from other words, and recall measured against another corpus, otherwise.
    # In this process (the script's own reuse path), not a second run: ~1.3 s of CPU less.
    bench = load_bench_module("search")
    other = bench.Corpus(200, vocabulary_size=3000)
    with pytest.raises(SystemExit, match="was built from another corpus"):
        if is_postgres(backend_db):
            pg = connect(str(backend_db), migrate=False)
            try:
                load_bench_module("postgres_search").check_postgres_built_alike(pg, other, bench)
            finally:
                pg.close()
        else:
            settings = Settings(db=tmp_path / "bench.db", embedder="hash")
            with Workspace(settings, embedder=HashingEmbedder()) as ws:
                bench.build(ws, other, write=False)


def load_bench_module(name: str) -> ModuleType:
    """bench/NAME.py as a module (bench/ is scripts, not a package)."""
    path = BENCH.parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"kbmcp_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _shape_model(tmp_path: Path) -> Path:
    """A model of 'real' vectors fitted to 400 clustered unit vectors (the bench's own model
    of real ones needs the real set: bench/real_vectors.py)."""
    shape = load_bench_module("vector_shape")
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((16, 384))
    rows = centres[rng.integers(16, size=400)] + 0.5 * rng.standard_normal((400, 384))
    path = tmp_path / "shape.npz"
    shape.fit_shape(shape.normalise(rows)).save(path)
    return path


def _scifact_folder(tmp_path: Path) -> Path:
    """A BEIR folder of 30 abstracts and 6 claims citing them (the real SciFact's shape)."""
    words = [
        "cell",
        "protein",
        "gene",
        "risk",
        "patients",
        "increased",
        "reduced",
        "expression",
        "mice",
        "tumor",
    ]
    rng = np.random.default_rng(4)
    folder = tmp_path / "scifact"
    folder.mkdir()
    with (folder / "corpus.jsonl").open("w") as corpus:
        for i in range(30):
            text = " ".join(rng.choice(words, 60))
            corpus.write(json.dumps({"_id": str(i), "title": f"Study {i}", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as queries:
        for i in range(6):
            claim = " ".join(rng.choice(words, 9))
            queries.write(json.dumps({"_id": f"q{i}", "text": claim}) + "\n")
    (folder / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{i * 4}\t1\n" for i in range(6))
    )
    return folder


def test_shaped_vectors_and_real_text_search_exactly(
    backend_db: Path | str, tmp_path: Path
) -> None:
    """--vectors shaped (rows drawn from a model of real vectors) and --corpus scifact (one
    abstract a document, the claims as queries) build and search every scope exactly; a
    corpus reused with other vectors than the flags draw is refused, not mislabelled."""
    shape = _shape_model(tmp_path)
    where = (
        ["--db", str(backend_db), "--postgres-only"]
        if is_postgres(backend_db)
        else ["--db", str(tmp_path / "bench.db")]
    )
    shaped = ["--vectors", "shaped", "--shape", str(shape)]
    rows = cells(run_bench(*where, *shaped))
    assert rows[0][0] == "unscoped" and len(rows) == 10
    assert all(recall == pytest.approx(1.0) for _, recall in rows), rows
    refused = run_bench(*where)  # the same corpus asked with hashing vectors
    assert refused.returncode != 0
    assert "holds other vectors than --vectors hashing" in refused.stderr
    if is_postgres(backend_db):
        return  # the real-text corpus is the SQLite server's case (issue 36, item 5)
    real = ["--corpus", "scifact", "--dataset", str(_scifact_folder(tmp_path)), *shaped]
    rows = cells(run_bench("--db", str(tmp_path / "real.db"), *real))
    assert len(rows) == 10 and all(recall == pytest.approx(1.0) for _, recall in rows), rows


def _clustered_rows(tangents: list[float], members: int, seed: int = 6) -> np.ndarray:
    """`members` rows around each of len(tangents) random centres (dimension 64), each at
    about its cluster's tangent from the centre."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(tangents), 64))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    offsets = rng.standard_normal((len(tangents) * members, 64)) / np.sqrt(64)
    scale = np.repeat(np.asarray(tangents), members)[:, None]
    return np.repeat(centres, members, axis=0) + scale * offsets


def test_tangent_slope_measures_what_a_new_document_finds() -> None:
    """A cluster that is tight because its rows are one document's chunks is not tight for a
    new document: its rows' other-document neighbours do not follow its tangent (slope ~0),
    while rows of distinct documents do (slope ~1); the tangents are shrunk by that slope."""
    shape = load_bench_module("vector_shape")
    tangents = [0.3, 1.0] * 8
    rows = shape.normalise(_clustered_rows(tangents, 30))
    cluster_tangents = np.repeat(np.asarray(tangents), 30)
    own_documents = np.arange(len(rows))
    one_document_a_cluster = np.repeat(np.arange(len(tangents)), 30)
    assert shape.tangent_slope(rows, own_documents, cluster_tangents) > 0.7
    assert shape.tangent_slope(rows, one_document_a_cluster, cluster_tangents) < 0.2
    shrunk = shape.shrunk_tangents(np.array([0.25, 1.0, 4.0]), 0.5)
    assert shrunk == pytest.approx([0.5, 1.0, 2.0])


def test_strands_bring_the_nearest_row_closer_and_old_files_draw_as_before(
    tmp_path: Path,
) -> None:
    """With strands (rows sharing part of their offset), a row's nearest other row in the set
    is closer than without them at the same spread, and a row's `near` query is closer to it;
    the model keeps its strand fields and second tiling through save/load, and a file without
    them draws exactly as before."""
    shape = load_bench_module("vector_shape")
    rows = shape.normalise(_clustered_rows([0.8] * 16, 25))
    model = shape.fit_shape(rows, documents=np.arange(len(rows)) // 4)
    assert model.strand_rows == pytest.approx(4.0)
    tightness, nears = [], []
    for share in (0.0, 0.5):
        generator = shape.ShapeGenerator(model.with_spread(1.0, share), len(rows))
        corpus = generator.corpus()
        tightness.append(shape.set_tightness(corpus))
        asked = generator.near(range(50))
        nears.append(np.einsum("ij,ij->i", asked, corpus[:50]).mean())
    assert tightness[1] > tightness[0] + 0.02 and nears[1] > nears[0] + 0.05, (tightness, nears)
    stranded = model.with_spread(0.9, 0.3, 0.4)
    stranded.save(tmp_path / "new.npz")
    loaded = shape.ShapeModel.load(tmp_path / "new.npz")
    assert (loaded.spread, loaded.strand_share, loaded.strand_rows) == (0.9, 0.3, 4.0)
    assert loaded.relative_share == 0.4 and loaded.tangent_slope == pytest.approx(
        model.tangent_slope
    )
    assert np.array_equal(loaded.other_centres, model.other_centres)
    assert np.array_equal(loaded.other_tangents, model.other_tangents)
    again = shape.ShapeGenerator(loaded, 300)
    assert np.array_equal(again.queries(20), shape.ShapeGenerator(stranded, 300).queries(20))
    old = shape.fit_shape(rows)  # no documents: no strands, tangents as measured
    assert (old.strand_rows, old.strand_share, old.tangent_slope) == (0.0, 0.0, 1.0)
    np.savez(tmp_path / "old.npz", centres=old.centres, sizes=old.sizes, tangents=old.tangents,
             noise=old.noise, fitted_rows=old.fitted_rows, spread=1.0,
             row_factors=old.row_factors)  # fmt: skip
    legacy = shape.ShapeModel.load(tmp_path / "old.npz")
    assert legacy.strand_share == 0.0 and legacy.tangent_slope == 1.0
    drawn = shape.ShapeGenerator(legacy, 300).row_range(0, 300)[0]
    assert np.array_equal(drawn, shape.ShapeGenerator(old, 300).row_range(0, 300)[0])


def test_nearest_centres_tells_a_row_beside_one_centre_from_one_between_two() -> None:
    """The check's centre figures: a row at a centre has cosine 1 to its nearest centre, a row
    halfway between two orthogonal centres has the same cosine to both (0.707)."""
    shape = load_bench_module("vector_shape")
    centres = np.eye(6, dtype=np.float32)
    beside = centres[:1]
    between = shape.normalise(centres[:1] + centres[1:2])
    at_centre = shape.nearest_centres(beside, centres)
    assert at_centre == pytest.approx({"nearest centre": 1.0, "2nd centre": 0.0, "5th centre": 0.0})
    halfway = shape.nearest_centres(between, centres)
    assert (
        halfway["nearest centre"]
        == pytest.approx(halfway["2nd centre"])
        == pytest.approx(0.7071, abs=1e-4)
    )


def test_held_out_queries_fall_between_centres_and_relatives_bring_a_row_close() -> None:
    """Queries drawn around the second tiling's centres sit further from the corpus's centres
    than its own rows do (as real held-out chunks sit between the fitted centres), and with
    relatives (a corpus row's offset carried) each query's nearest row is closer than without."""
    shape = load_bench_module("vector_shape")
    rows = shape.normalise(_clustered_rows([0.8] * 16, 25))
    model = shape.fit_shape(rows, documents=np.arange(len(rows)) // 4)
    assert model.other_centres is not None and len(model.other_centres) == len(model.centres)
    generator = shape.ShapeGenerator(model.with_spread(1.0, 0.2, 0.0), len(rows))
    corpus = generator.corpus()
    plain = generator.queries(200)
    rows_at = shape.nearest_centres(corpus, generator.centres)["nearest centre"]
    queries_at = shape.nearest_centres(plain, generator.centres)["nearest centre"]
    assert queries_at < rows_at - 0.01, (queries_at, rows_at)
    related = shape.ShapeGenerator(model.with_spread(1.0, 0.2, 1.0), len(rows))
    assert np.array_equal(related.corpus(), corpus)  # the queries' share leaves the set alone
    _, alone = shape.exact_top(corpus, plain)
    _, with_relatives = shape.exact_top(corpus, related.queries(200))
    assert with_relatives[:, 0].mean() > alone[:, 0].mean() + 0.05


def test_a_larger_corpus_keeps_the_fitted_spread_and_older_files_keep_theirs(
    tmp_path: Path,
) -> None:
    """A model fitted now draws a corpus three times its fitted size around the fitted centres,
    its rows as close to them as at the fitted size; a file from before the second tiling still
    draws new centres as rows of the fitted clusters, which puts its rows further out."""
    shape = load_bench_module("vector_shape")
    rows = shape.normalise(_clustered_rows([0.8] * 16, 25))
    model = shape.fit_shape(rows, documents=np.arange(len(rows)) // 4)
    assert model.child_centres is False

    def closeness(chosen: object, count: int) -> float:
        drawn = shape.ShapeGenerator(chosen, count).corpus()
        return shape.nearest_centres(drawn, model.centres)["nearest centre"]

    fitted = closeness(model, len(rows))
    assert shape.ShapeGenerator(model, 3 * len(rows)).centres is model.centres
    assert closeness(model, 3 * len(rows)) == pytest.approx(fitted, abs=0.01)
    older = dataclasses.replace(model, child_centres=True)
    assert closeness(older, 3 * len(rows)) < fitted - 0.05
    model.save(tmp_path / "now.npz")
    assert shape.ShapeModel.load(tmp_path / "now.npz").child_centres is False
    np.savez(tmp_path / "before.npz", centres=model.centres, sizes=model.sizes,
             tangents=model.tangents, noise=model.noise, fitted_rows=model.fitted_rows,
             spread=1.0)  # fmt: skip
    assert shape.ShapeModel.load(tmp_path / "before.npz").child_centres is True


def test_bridges_put_strands_between_centres_and_the_query_spread_moves_queries_out(
    tmp_path: Path,
) -> None:
    """With bridges a strand's rows lie on the way to a neighbouring centre: further from their
    own centre and closer to their second than without; a larger query spread puts held-out
    queries further from their nearest centre; both numbers survive save/load, and a file
    without them loads as a model without bridges (0) at the rows' own spread (1)."""
    shape = load_bench_module("vector_shape")
    rows = shape.normalise(_clustered_rows([0.8] * 16, 25))
    model = shape.fit_shape(rows, documents=np.arange(len(rows)) // 4)
    assert model.bridge_reach == shape.BRIDGE_REACH > 0
    bridged = model.with_spread(1.0, 0.5, 0.0, 1.0)
    plain = dataclasses.replace(bridged, bridge_reach=0.0)
    at = {}
    for name, chosen in (("plain", plain), ("bridged", bridged)):
        at[name] = shape.nearest_centres(shape.ShapeGenerator(chosen, len(rows)).corpus(),
                                         model.centres)  # fmt: skip
    assert at["bridged"]["nearest centre"] < at["plain"]["nearest centre"] - 0.02, at
    assert at["bridged"]["2nd centre"] > at["plain"]["2nd centre"] + 0.02, at
    nearest = [shape.nearest_centres(shape.ShapeGenerator(
        bridged.with_spread(1.0, 0.5, 0.0, query_spread), len(rows)).queries(200),
        model.centres)["nearest centre"] for query_spread in (1.0, 1.4)]  # fmt: skip
    assert nearest[1] < nearest[0] - 0.02, nearest
    wider = bridged.with_spread(1.0, 0.5, 0.0, 1.3)
    wider.save(tmp_path / "bridged.npz")
    loaded = shape.ShapeModel.load(tmp_path / "bridged.npz")
    assert (loaded.bridge_reach, loaded.query_spread) == (shape.BRIDGE_REACH, 1.3)
    assert np.array_equal(shape.ShapeGenerator(loaded, 300).corpus(),
                          shape.ShapeGenerator(wider, 300).corpus())  # fmt: skip
    np.savez(tmp_path / "before.npz", centres=model.centres, sizes=model.sizes,
             tangents=model.tangents, noise=model.noise, fitted_rows=model.fitted_rows,
             spread=1.0)  # fmt: skip
    before = shape.ShapeModel.load(tmp_path / "before.npz")
    assert (before.bridge_reach, before.query_spread) == (0.0, 1.0)


def test_the_fit_chooses_the_query_spread_by_the_nearest_centre() -> None:
    """The fit's last number follows its figure: a target whose held-out chunks sit far from
    the fitted centres gets the widest query spread tried, one that sits by them the
    narrowest."""
    shape = load_bench_module("vector_shape")
    rows = shape.normalise(_clustered_rows([0.8] * 16, 25))
    model = shape.fit_shape(rows, documents=np.arange(len(rows)) // 4)
    generator = shape.ShapeGenerator(model, len(rows))
    corpus, asked = generator.corpus(), generator.queries(100)
    _, cosines = shape.exact_top(corpus, asked)
    real_shape = shape.neighbourhood(corpus, asked, cosines)
    chosen = {}
    for centre in (0.0, 1.0):
        target = shape.Target(real_shape, shape.set_tightness(corpus), centre)
        fitted, tried = shape.choose_shape(model, len(rows), 100, target)
        chosen[centre] = fitted.query_spread
        assert all(len(choice) == 4 for choice in tried)
    assert chosen == {0.0: max(shape.QUERY_SPREADS), 1.0: min(shape.QUERY_SPREADS)}


def test_clusters_of_ten_counts_the_clusters_a_querys_neighbours_fall_in() -> None:
    """Ten rows of the query's own cluster: one cluster, all its own; ten rows over five
    clusters, two of them the query's: five clusters, a fifth its own."""
    shape = load_bench_module("vector_shape")
    centres = np.eye(8, dtype=np.float32)
    corpus = np.repeat(centres[:5], 2, axis=0)  # rows 0-1 by centre 0, 2-3 by centre 1, ...
    query = centres[:1]
    assert shape.clusters_of_ten(corpus, query, np.array([[0] * 10]), centres) == {
        "clusters of the ten": 1.0, "ten in own cluster": 1.0}  # fmt: skip
    spread = shape.clusters_of_ten(corpus, query, np.arange(10)[None], centres)
    assert spread == {"clusters of the ten": 5.0, "ten in own cluster": pytest.approx(0.2)}
