"""Vectors shaped like real ones: a clustered Gaussian fitted to real chunk vectors, and its check.

    python bench/vector_shape.py --db postgresql://… [--cache DIR] [--holdout 500] [--out FILE]

The hashing embedder's vectors are the wrong shape for judging a graph index (any two chunks at
cosine ~0.5, a query's true ten barely above the rest), and embedding a million chunks with the
real model is a day of CPU here. So the benches draw vectors from a model of real ones:

- **fit** (`fit_shape`): spherical k-means of real unit vectors with k = N / 25 (a neighbourhood
  of ~25 chunks: the clusters keep the real set's topics and their sizes); each cluster keeps its
  direction, its size and its spread (the median tangent of a member's angle to the centre); the
  noise's shape is the covariance of every member's offset from its centre, perpendicular to it
  (real offsets are far from isotropic: a few hundred directions carry most of it). Each row
  keeps its own spread factor (its tangent over its cluster's median: `row_factors`).
- **shrunk tangents** (`tangent_slope`, with the rows' documents): a cluster's tangent is
  measured on its members, sibling chunks of one document included, but a new document's chunk
  (a held-out chunk, a question) finds only part of that tightness around it: over the real
  rows, the log of the tangent of a row's tenth nearest *other-document* neighbour rises with
  its cluster's log tangent at a slope of ~0.5, not 1. Drawn with the measured tangents, a
  drawn query's neighbourhood followed its cluster's tightness fully: the tenth neighbour's
  cosine varied far more than the real one (sd 0.120 against 0.083). So the tangents are pulled
  towards their median on a log scale by that measured slope.
- **strands** (`strand_rows`, `strand_share`): real neighbours are not independent draws around
  a centre: a query's offset from its centre and its nearest neighbour's point the same way
  (mean cosine 0.42 on the real set, 0.08 drawn without strands), which puts the nearest row
  closer than the rest (the real first neighbour's mean cosine was 0.03 above the drawn one;
  near-copies, 3% of the rows above 0.9, explain only a third of that). So each cluster's rows
  come in strands of `strand_rows` rows (the fitted set's rows per document, 3.6) that share
  `strand_share` of their offset's variance: a strand's point is drawn around the centre, its
  rows around the point with the rest of the variance, so a row's offset has the same size.
- **bridges** (`bridge_reach`): k-means cuts a continuum of topics into clusters, so a real
  row's ten nearest rows lie in 4.4 clusters on average and only 45% of them in its own; drawn
  around the centres alone, 1.8 clusters and 81%: each cluster a clump a graph index finds its
  way through. So each strand's point lies on the way from its cluster's centre towards one of
  its BRIDGE_NEIGHBOURS nearest other centres, a uniform fraction of up to BRIDGE_REACH of the
  way, the step taken across the set's mean direction (the neighbourhoods then reach across
  clusters: 2.7 clusters, 62%).
- **draw** (`ShapeGenerator`): a row is its strand's point plus `spread` x its cluster's tangent
  x its factor x noise of that covariance, L2-normalised (a model without strands, as older
  files are: the cluster's centre). A corpus of any size is drawn around the fitted centres: a
  larger one is a larger sample of the same clusters, with more strands to each, its rows spread
  around their centres as the checked set's are (`child_centres` False). Files from before the
  second tiling drew a corpus over 1.5x the fitted size around new centres, themselves drawn as
  rows of the fitted clusters (~25 rows a centre); that doubled each row's offset variance from
  its fitted centre (random pairs at 0.035 at 1M rows against 0.065 at the fitted size, real
  0.068), and they still draw so, for the tables built from them. `near` a row is a new row of
  its strand (the benches' question about a given chunk).
- **held-out queries** (`queries`, the check's drawn queries): a real chunk the fit never saw
  sits between the fitted centres (mean cosine 0.635 to its nearest and 0.577 to its second,
  where the fitted rows sit at 0.744 and 0.617), which is what makes a graph index miss its
  neighbours; a row drawn around a centre sits by it. So the fit also keeps a second tiling of
  the same rows (k-means from another start: `other_centres`, with their sizes and shrunk
  tangents), and a held-out query is a row drawn around one of its centres (bridged as the
  strands are), `query_spread` times as far out as a row: between the first tiling's centres,
  and further from the nearest one than a fitted row, as an unseen chunk is. `relative_share`
  of them also carry the whole offset of a corpus row of the cluster they fall in (a relative:
  the same passage in another document), which puts their nearest row as close as a real
  chunk's.
- **check** (this script): hold out `--holdout` real chunks of whole documents as queries (a
  chunk's siblings would be its nearest rows, as a question's text is not), fit the rest, draw a
  set of the same size and as many held-out queries, and compare: random pairs' cosines, each
  query's exact nearest and tenth-nearest neighbour, and pgvector's HNSW recall@10 at
  `ef_search` 10, 20, 40 and 100 (pgvector's defaults, m 16 and ef_construction 64; the median
  of `--builds` builds, 15 by default: one build's recall at ef 10 moves by a few hundredths,
  seven builds of the real set gave 0.860-0.922, medians of three moved by 0.03 between runs
  and medians of seven by 0.01, a half of the tolerance), each within `TOLERANCE`. The real
  queries (SciFact claims and the docs questions) are searched in the real set too: their
  curve is the lower bound a user's questions give. Each
  query set's mean cosine to its nearest, second and fifth fitted centre says whether its rows
  sit beside one centre or between several; `--crossed` adds each side's queries searched in the
  other side's set. Four numbers are free, each chosen on a grid by the figure it moves most
  (`choose_shape`): the strands' share and `spread` together by the set's own tightness (a row's
  nearest other row: real sets are tight with sibling chunks, and a graph index is built over
  them) and the queries' tenth neighbour, then `relative_share` by the queries' first neighbour
  and `query_spread` by their nearest centre. Those four means are fitted, not checked; the
  slope and the strands' size are measured, the bridges' reach a constant; every other figure
  is a check, the queries' second and fifth centre among them.

The real vectors come from bench/real_vectors.py's cache (`--cache`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROWS_PER_CLUSTER = 25
QUANTILES = 100  # of the rows' spread factors kept by the fit
KMEANS_ROUNDS = 25
EF_SEARCHES = (10, 20, 40, 100)
TUNE_EF_SEARCHES = (20, 40, 80, 160, 320)
TOLERANCE = 0.02
BLOCK = 8_192  # rows drawn at a time, each block from its own seeded generator
SPREADS = (0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2)  # what the fit tries
STRAND_SHARES = (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8)  # tried with each spread
RELATIVE_SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # tried with the chosen pair
FIRST_RELATIVE_SHARE = 0.3  # the queries' relative share while spread and strands are chosen
QUERY_SPREADS = (1.0, 1.1, 1.2, 1.3, 1.4)  # the held-out queries' own scale, tried last
FIRST_QUERY_SPREAD = 1.2  # the queries' scale while the other numbers are chosen
# Bridges: each strand's point lies on the way from its cluster's centre towards one of the
# BRIDGE_NEIGHBOURS nearest other centres, a uniform fraction of up to BRIDGE_REACH of the way.
BRIDGE_NEIGHBOURS = 5
BRIDGE_REACH = 0.8
OTHER_TILING_SEED = 6  # the second k-means' start (spherical_kmeans' own default is 5)
SET_SAMPLE = 2_000  # rows whose nearest other row is measured (the set's own tightness)
# Optional numbers (absent from older files, which draw as before without them).
NUMBER_FIELDS = ("tangent_slope", "strand_rows", "strand_share", "relative_share", "bridge_reach",
                 "query_spread")  # fmt: skip
OTHER_TILING_FIELDS = ("other_centres", "other_sizes", "other_tangents")  # absent from older


def normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


def perpendicular(rows: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Each row's offset from its centre (row i's is `centres[i]`), perpendicular to it."""
    along = np.einsum("ij,ij->i", rows, centres)
    return rows - along[:, None] * centres


def spherical_kmeans(
    rows: np.ndarray, k: int, rounds: int = KMEANS_ROUNDS, seed: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """(unit centres (k, d), each row's cluster) of unit `rows`, by cosine: Lloyd's rounds from
    k distinct rows; a cluster left empty restarts at the row farthest from its own centre."""
    rng = np.random.default_rng(seed)
    centres = rows[rng.choice(len(rows), k, replace=False)].copy()
    labels = np.zeros(len(rows), dtype=np.int64)
    for _ in range(rounds):
        similarity = rows @ centres.T
        labels = similarity.argmax(axis=1)
        best = similarity[np.arange(len(rows)), labels]
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, rows)
        counts = np.bincount(labels, minlength=k)
        for empty, farthest in zip(np.flatnonzero(counts == 0), np.argsort(best), strict=False):
            sums[empty] = rows[farthest]
        centres = normalise(sums)
    return centres, labels


@dataclass(frozen=True)
class ShapeModel:
    """What `fit_shape` keeps of a real set (enough to draw any number of rows)."""

    centres: np.ndarray  # (k, d) unit
    sizes: np.ndarray  # (k,) members of each cluster in the fitted set
    tangents: np.ndarray  # (k,) median tan(angle to the centre) of the members
    noise: np.ndarray  # (d, d): z @ noise.T has the offsets' covariance, mean square norm 1
    fitted_rows: int
    spread: float = 1.0
    # Quantiles (0, 1/QUANTILES, ..., 1) of a member's tangent over its cluster's median: rows
    # are drawn with such factors, so some lie close to their centre and some far from it, as
    # real rows do (one spread per cluster made every row alike: nearest rows too far, and a
    # graph index's search too easy). None: one spread per cluster.
    row_factors: np.ndarray | None = None
    # The slope the tangents were shrunk by (`tangent_slope`; 1: as measured, not shrunk).
    tangent_slope: float = 1.0
    # Strands: rows per strand (the fitted set's rows per document; 0: no strands) and the
    # share of a row's offset variance its strand's rows have in common (chosen with `spread`).
    strand_rows: float = 0.0
    strand_share: float = 0.0
    # A second tiling of the same rows (k-means from another start): where held-out queries
    # are drawn around (`ShapeGenerator.queries`); None in older files (queries as before).
    other_centres: np.ndarray | None = None
    other_sizes: np.ndarray | None = None
    other_tangents: np.ndarray | None = None
    # The share of held-out queries that carry a relative's offset (chosen by the fit).
    relative_share: float = 0.0
    # How far towards a neighbouring centre a strand's point (and a held-out query's centre)
    # may lie (`bridged`; 0: at its own centre, as in older files).
    bridge_reach: float = 0.0
    # The held-out queries' offsets over the rows' (chosen by the fit; 1 in older files).
    query_spread: float = 1.0
    # How a corpus larger than the fitted set is drawn: False, more rows of the fitted
    # clusters (a larger sample of the same topics, more strands to each, its rows spread
    # around the fitted centres as the checked set's are); True (files from before the second
    # tiling), new centres drawn as rows of the fitted clusters, which doubled each row's
    # offset variance: random pairs at 0.035 at 1M rows against 0.065 at the fitted size
    # (real: 0.068).
    child_centres: bool = True

    def with_spread(
        self,
        spread: float,
        strand_share: float | None = None,
        relative_share: float | None = None,
        query_spread: float | None = None,
    ) -> ShapeModel:
        share = self.strand_share if strand_share is None else strand_share
        related = self.relative_share if relative_share is None else relative_share
        queries = self.query_spread if query_spread is None else query_spread
        return dataclasses.replace(self, spread=spread, strand_share=share, relative_share=related,
                                   query_spread=queries)  # fmt: skip

    def save(self, path: Path) -> None:
        optional = {name: getattr(self, name) for name in ("row_factors", *OTHER_TILING_FIELDS)
                    if getattr(self, name) is not None}  # fmt: skip
        np.savez(path, centres=self.centres, sizes=self.sizes, tangents=self.tangents,
                 noise=self.noise, fitted_rows=self.fitted_rows, spread=self.spread,
                 tangent_slope=self.tangent_slope, strand_rows=self.strand_rows,
                 strand_share=self.strand_share, relative_share=self.relative_share,
                 bridge_reach=self.bridge_reach, query_spread=self.query_spread,
                 child_centres=self.child_centres, **optional)  # fmt: skip

    @classmethod
    def load(cls, path: Path) -> ShapeModel:
        """A saved model; a file from before strands, shrunk tangents or the second tiling
        draws as it did."""
        with np.load(path) as data:
            factors = data.get("row_factors", None)
            extra: dict[str, Any] = {
                name: float(data[name]) for name in NUMBER_FIELDS if name in data
            }
            extra.update({name: data[name] for name in OTHER_TILING_FIELDS if name in data})
            if "child_centres" in data:
                extra["child_centres"] = bool(data["child_centres"])
            return cls(data["centres"], data["sizes"], data["tangents"], data["noise"],
                       int(data["fitted_rows"]), float(data["spread"]), factors,
                       **extra)  # fmt: skip


def fit_shape(
    rows: np.ndarray,
    rows_per_cluster: int = ROWS_PER_CLUSTER,
    documents: np.ndarray | None = None,
) -> ShapeModel:
    """The model of unit `rows`; with `documents` (each row's document number) the clusters'
    tangents are shrunk towards their median by `tangent_slope` (see the module docstring)."""
    k = max(1, len(rows) // rows_per_cluster)
    centres, labels = spherical_kmeans(rows, k)
    sizes, tangents, factors, offsets = cluster_spreads(rows, centres, labels)
    other_centres, other_labels = spherical_kmeans(rows, k, seed=OTHER_TILING_SEED)
    other_sizes, other_tangents, _, _ = cluster_spreads(rows, other_centres, other_labels)
    slope, strand_rows = 1.0, 0.0
    if documents is not None:
        slope = tangent_slope(rows, documents, tangents[labels])
        tangents = shrunk_tangents(tangents, slope)
        other_tangents = shrunk_tangents(other_tangents, slope)
        strand_rows = len(rows) / len(np.unique(documents))
    row_factors = np.quantile(np.concatenate(factors), np.linspace(0, 1, QUANTILES + 1))
    offset_norms = np.linalg.norm(offsets, axis=1)
    # The noise's covariance: every member's offset scaled to unit length (the tangent carries
    # the size), so large clusters do not set the shape alone.
    unit_offsets = offsets / np.maximum(offset_norms, 1e-12)[:, None]
    covariance = unit_offsets.T @ unit_offsets / len(rows)
    values, vectors = np.linalg.eigh(covariance)
    values = np.clip(values, 0, None)
    noise = (vectors * np.sqrt(values / values.sum())).astype(np.float32)
    return ShapeModel(centres, sizes, tangents.astype(np.float32), noise, len(rows),
                      row_factors=row_factors.astype(np.float32), tangent_slope=slope,
                      strand_rows=strand_rows, child_centres=False, bridge_reach=BRIDGE_REACH,
                      other_centres=other_centres,
                      other_sizes=other_sizes,
                      other_tangents=other_tangents.astype(np.float32))  # fmt: skip


def cluster_spreads(
    rows: np.ndarray, centres: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    """(each cluster's size, its median tangent (the median of every cluster's for one of one
    or two rows), each measured cluster's members' tangents over its median, every row's
    offset perpendicular to its centre)."""
    k = len(centres)
    along = np.einsum("ij,ij->i", rows, centres[labels])
    offsets = perpendicular(rows, centres[labels])
    ratio = np.linalg.norm(offsets, axis=1) / np.maximum(along, 1e-6)
    sizes = np.bincount(labels, minlength=k)
    tangents = np.full(k, np.nan)
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(k))
    factors = []
    for c, (start, stop) in enumerate(zip(starts, [*starts[1:], len(rows)], strict=True)):
        if stop - start >= 3:  # a centre fitted to one or two rows says nothing of their spread
            members = ratio[order[start:stop]]
            tangents[c] = np.median(members)
            factors.append(members / max(tangents[c], 1e-6))
    tangents[np.isnan(tangents)] = np.nanmedian(tangents)
    return sizes, tangents, factors, offsets


def other_document_cosine(rows: np.ndarray, documents: np.ndarray, nth: int = 10) -> np.ndarray:
    """Each row's cosine to its `nth` nearest row of another document (the neighbourhood a
    new document's chunk finds: its own siblings are not there); -1 where there are fewer."""
    found = np.full(len(rows), -1.0, dtype=np.float32)
    for first in range(0, len(rows), 256):
        similarity = rows[first : first + 256] @ rows.T
        similarity[documents[first : first + 256, None] == documents[None, :]] = -np.inf
        if similarity.shape[1] >= nth:
            nearest = -np.partition(-similarity, nth - 1, axis=1)[:, nth - 1]
            found[first : first + 256] = np.where(np.isfinite(nearest), nearest, -1.0)
    return found


def tangent_slope(rows: np.ndarray, documents: np.ndarray, cluster_tangents: np.ndarray) -> float:
    """How much of its cluster's tightness a new document's chunk finds around it: the slope of
    log tan(angle to a row's tenth other-document neighbour) on log of its cluster's tangent,
    over the real rows, within [0, 1] (1: the cluster's tangent alone sets it)."""
    cosines = other_document_cosine(rows, documents)
    usable = (cosines > 0) & (cosines < 1) & (cluster_tangents > 0)
    if usable.sum() < 3:
        return 1.0
    near = np.sqrt(1 / cosines[usable].astype(np.float64) ** 2 - 1)
    slope = np.polyfit(np.log(cluster_tangents[usable]), np.log(near), 1)[0]
    return float(np.clip(slope, 0.0, 1.0))


def shrunk_tangents(tangents: np.ndarray, slope: float) -> np.ndarray:
    """The clusters' tangents pulled towards their median on a log scale: a cluster twice as
    tight as the median is drawn 2**slope times as tight."""
    median = np.median(tangents)
    return median * (np.maximum(tangents, 1e-6) / median) ** slope


def nearest_others(centres: np.ndarray) -> np.ndarray:
    """Each centre's BRIDGE_NEIGHBOURS nearest other centres (indices), nearest first."""
    closeness = centres @ centres.T
    np.fill_diagonal(closeness, -np.inf)
    return np.argsort(-closeness, axis=1, kind="stable")[:, :BRIDGE_NEIGHBOURS]


class ShapeGenerator:
    """`rows` rows drawn from `model`, reproducibly from `seed` (block by block: any row range
    can be drawn alone, as the bench's writing processes do), and further rows of the clusters
    of given rows (a query near a chunk) or of random clusters."""

    def __init__(self, model: ShapeModel, rows: int, seed: int = 17) -> None:
        self.model, self.rows, self.seed = model, rows, seed
        rng = np.random.default_rng([seed, 0])
        weights = model.sizes / model.sizes.sum()
        if rows <= model.fitted_rows * 3 // 2 or not model.child_centres:
            self.centres = model.centres
            self.tangents = model.tangents
        else:  # (older files) more neighbourhoods: centres drawn as rows of the fitted ones
            count = rows // ROWS_PER_CLUSTER
            parents = rng.choice(len(weights), count, p=weights)
            self.tangents = model.tangents[parents]
            self.centres = self._around(rng, model.centres[parents], self.tangents)
            weights = np.full(count, 1 / count)
        self.cdf = np.cumsum(weights)
        self.cdf /= self.cdf[-1]
        # Each cluster's strands: as many as its expected rows hold documents' worth of rows.
        self.strands = np.ones(len(weights), dtype=np.int64)
        if model.strand_share > 0 and model.strand_rows > 0:
            expected = weights * rows / model.strand_rows
            self.strands = np.maximum(1, np.round(expected)).astype(np.int64)
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._cluster_rows: dict[int, np.ndarray] | None = None

    def _around(self, rng: np.random.Generator, centres: np.ndarray, tangents: np.ndarray
                ) -> np.ndarray:  # fmt: skip
        return normalise(centres + self._steps(rng, tangents))

    def _steps(self, rng: np.random.Generator, tangents: np.ndarray) -> np.ndarray:
        """Offsets of `spread` x tangent x a row factor x noise, one a tangent."""
        z = rng.standard_normal((len(tangents), self.model.noise.shape[0]), dtype=np.float32)
        scale = self.model.spread * tangents
        factors = self.model.row_factors
        if factors is not None:  # each row its own factor, drawn from the real rows' ones
            at = rng.random(len(tangents)) * (len(factors) - 1)
            scale = scale * np.interp(at, np.arange(len(factors)), factors).astype(np.float32)
        return scale[:, None] * (z @ self.model.noise.T)

    def _strand_points(self, clusters: np.ndarray, strands: np.ndarray) -> np.ndarray:
        """The centre of each (cluster, strand), not normalised: the cluster's centre plus the
        strand's shared offset. Each strand's offset comes from its own seeded generator, so a
        block, a query and `near` find the same strand without keeping them all."""
        share = self.model.strand_share
        points = self.centres[clusters].copy()
        if share <= 0:
            return points
        pairs, where = np.unique(np.stack([clusters, strands], axis=1), axis=0, return_inverse=True)
        draws = [np.random.default_rng([self.seed, 4, int(c), int(j)]) for c, j in pairs]
        dimension = self.model.noise.shape[0]
        z = np.stack([rng.standard_normal(dimension, dtype=np.float32) for rng in draws])
        scale = self.model.spread * np.sqrt(share) * self.tangents[pairs[:, 0]]
        shared = scale[:, None] * (z @ self.model.noise.T)
        if self.model.bridge_reach > 0:  # drawn after z: a model without bridges draws as before
            picks = np.array([(rng.integers(BRIDGE_NEIGHBOURS), rng.random()) for rng in draws])
            bridges = self._bridged(self.centres, self._row_neighbours, pairs[:, 0], picks)
            shared += bridges - self.centres[pairs[:, 0]]
        return points + shared[where.ravel()]

    def _bridged(self, centres: np.ndarray, neighbours: np.ndarray, clusters: np.ndarray,
                 picks: np.ndarray) -> np.ndarray:  # fmt: skip
        """Points on the way from each cluster's centre towards one of its nearest other
        centres of `centres` (`neighbours`: `nearest_others(centres)`; picks: [which neighbour,
        fraction of the reach]), the step taken across the set's mean direction only: the
        centres most often another's neighbour lie towards the whole set's middle, and with the
        whole step random pairs drew closer (0.088 against the real 0.068; across it, 0.077)."""
        towards = neighbours[clusters, picks[:, 0].astype(np.int64)]
        way = (picks[:, 1] * self.model.bridge_reach)[:, None].astype(np.float32)
        step = normalise((1 - way) * centres[clusters] + way * centres[towards]) - centres[clusters]
        step -= (step @ self._middle)[:, None] * self._middle[None, :]
        return normalise(centres[clusters] + step)

    # Computed once per generator: `_bridged` runs for every block of rows and every `near`
    # (a million rows: 122 blocks, ~50 ms each time for the neighbours of 902 centres).
    @functools.cached_property
    def _row_neighbours(self) -> np.ndarray:
        return nearest_others(self.centres)

    @functools.cached_property
    def _query_neighbours(self) -> np.ndarray:
        assert self.model.other_centres is not None
        return nearest_others(self.model.other_centres)

    @functools.cached_property
    def _middle(self) -> np.ndarray:
        """The set's mean direction (its clusters' centres weighted by their sizes)."""
        weighted = (self.model.sizes[:, None] * self.model.centres).sum(axis=0)
        return normalise(weighted[None])[0]

    def _rows_of(self, rng: np.random.Generator, clusters: np.ndarray, strands: np.ndarray
                 ) -> np.ndarray:  # fmt: skip
        """New rows of these strands: the strand's point plus the row's own offset, which
        carries the rest (1 - strand_share) of the offset's variance."""
        own = np.sqrt(1 - self.model.strand_share) if self.model.strand_share > 0 else 1.0
        steps = own * self._steps(rng, self.tangents[clusters])
        return normalise(self._strand_points(clusters, strands) + steps)

    def _draw(self, rng: np.random.Generator, count: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        clusters = self.cdf.searchsorted(rng.random(count), side="right")
        strands = np.zeros(count, dtype=np.int64)
        if self.model.strand_share > 0:  # (without strands, the draws of older models stay)
            strands = (rng.random(count) * self.strands[clusters]).astype(np.int64)
        return self._rows_of(rng, clusters, strands), clusters, strands

    def _block(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, their clusters, their strands) of block `index`; the last two drawn are kept."""
        if index not in self._blocks:
            if len(self._blocks) >= 2:
                del self._blocks[next(iter(self._blocks))]
            rng = np.random.default_rng([self.seed, 1, index])
            count = min(BLOCK, self.rows - index * BLOCK)
            self._blocks[index] = self._draw(rng, count)
        return self._blocks[index]

    def row_range(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, clusters) `first` to `first + count` of the corpus."""
        if first < 0 or first + count > self.rows:
            raise IndexError(f"rows {first}-{first + count} of {self.rows}")
        parts = [], []
        row = first
        while row < first + count:
            index, offset = divmod(row, BLOCK)
            vectors, clusters, _ = self._block(index)
            take = min(len(vectors) - offset, first + count - row)
            parts[0].append(vectors[offset : offset + take])
            parts[1].append(clusters[offset : offset + take])
            row += take
        if not parts[0]:
            return np.zeros((0, self.centres.shape[1]), np.float32), np.zeros(0, np.int64)
        return np.concatenate(parts[0]), np.concatenate(parts[1])

    def corpus(self) -> np.ndarray:
        return self.row_range(0, self.rows)[0]

    def queries(self, count: int, seed: int = 3) -> np.ndarray:
        """Queries not in the corpus, drawn as held-out chunks are: around the centres of the
        model's second tiling (so they fall between the corpus's centres, as a chunk the fit
        never saw does), `relative_share` of them carrying a corpus row's offset from its
        centre (a relative: the same passage elsewhere). A model without a second tiling
        (older files): rows of random strands, as before."""
        model = self.model
        centres, sizes, tangents = model.other_centres, model.other_sizes, model.other_tangents
        if centres is None or sizes is None or tangents is None:
            return self._draw(np.random.default_rng([self.seed, 2, seed]), count)[0]
        rng = np.random.default_rng([self.seed, 5, seed])
        tiles = rng.choice(len(sizes), count, p=sizes / sizes.sum())
        bases = centres[tiles]
        if model.bridge_reach > 0:  # (drawn only then: models without bridges draw as before)
            picks = np.stack([rng.integers(BRIDGE_NEIGHBOURS, size=count), rng.random(count)], 1)
            bases = self._bridged(centres, self._query_neighbours, tiles, picks)
        points = self._around(rng, bases, tangents[tiles] * np.float32(model.query_spread))
        clusters = (points @ self.centres.T).argmax(axis=1)  # the corpus's cluster of each
        related = rng.random(count) < model.relative_share
        chosen = rng.random(count)  # which member of its cluster a relative is
        relatives = np.full(count, -1, dtype=np.int64)
        for i in np.flatnonzero(related):  # (the members are drawn only when one is needed)
            rows = self._members().get(int(clusters[i]))
            if rows is not None:  # (a cluster may have drawn no corpus row)
                relatives[i] = rows[int(chosen[i] * len(rows))]
        return normalise(points + self._offsets(relatives))

    def _members(self) -> dict[int, np.ndarray]:
        """Each cluster's corpus rows (every block drawn once, then kept)."""
        if self._cluster_rows is None:
            clusters = np.concatenate([self._block(index)[1]
                                       for index in range(-(-self.rows // BLOCK))])  # fmt: skip
            order = np.argsort(clusters, kind="stable")
            found, starts = np.unique(clusters[order], return_index=True)
            self._cluster_rows = dict(zip(found.tolist(), np.split(order, starts[1:]),
                                          strict=True))  # fmt: skip
        return self._cluster_rows

    def _offsets(self, rows: np.ndarray) -> np.ndarray:
        """Each corpus row's offset from its cluster's centre, perpendicular to it (zeros
        where `rows` is -1), read block by block."""
        offsets = np.zeros((len(rows), self.centres.shape[1]), dtype=np.float32)
        for index in np.unique(rows[rows >= 0] // BLOCK):
            vectors, clusters, _ = self._block(int(index))
            here = np.flatnonzero((rows >= 0) & (rows // BLOCK == index))
            at = rows[here] - index * BLOCK
            offsets[here] = perpendicular(vectors[at], self.centres[clusters[at]])
        return offsets

    def near(self, rows: Sequence[int], seed: int = 4) -> np.ndarray:
        """A new row of the strand of each of these corpus rows (a query about that chunk)."""
        clusters = np.zeros(len(rows), dtype=np.int64)
        strands = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows):
            if not 0 <= int(row) < self.rows:
                raise IndexError(f"row {row} of {self.rows}")
            index, offset = divmod(int(row), BLOCK)
            _, in_block, strand_of = self._block(index)
            clusters[i], strands[i] = in_block[offset], strand_of[offset]
        rng = np.random.default_rng([self.seed, 3, seed])
        return self._rows_of(rng, clusters, strands)


# ------------------------------------------------------------------ the figures compared


def exact_top(
    corpus: np.ndarray, queries: np.ndarray, k: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, cosines) of each query's k nearest rows, best first."""
    ids = np.zeros((len(queries), k), dtype=np.int64)
    cosines = np.zeros((len(queries), k), dtype=np.float32)
    for first in range(0, len(queries), 256):
        similarity = queries[first : first + 256] @ corpus.T
        top = np.argpartition(-similarity, k, axis=1)[:, :k]
        scores = np.take_along_axis(similarity, top, axis=1)
        order = np.argsort(-scores, axis=1)
        ids[first : first + 256] = np.take_along_axis(top, order, axis=1)
        cosines[first : first + 256] = np.take_along_axis(scores, order, axis=1)
    return ids, cosines


@dataclass(frozen=True)
class Neighbourhood:
    """Cosine statistics of a corpus and its queries."""

    pairs_mean: float
    pairs_sd: float
    first_mean: float
    first_sd: float
    tenth_mean: float
    tenth_sd: float

    @property
    def tenth_above_background(self) -> float:
        """How many standard deviations of a random pair the tenth neighbour stands above it."""
        return (self.tenth_mean - self.pairs_mean) / self.pairs_sd

    def figures(self) -> dict[str, float]:
        return {
            "random pair mean": self.pairs_mean,
            "random pair sd": self.pairs_sd,
            "1st neighbour mean": self.first_mean,
            "1st neighbour sd": self.first_sd,
            "10th neighbour mean": self.tenth_mean,
            "10th neighbour sd": self.tenth_sd,
        }


def nearest_centres(queries: np.ndarray, centres: np.ndarray) -> dict[str, float]:
    """Where queries sit among the fitted centres: the mean cosine to their nearest, second
    and fifth nearest centre (a row beside one centre, or between several)."""
    ranked = -np.sort(-(queries @ centres.T), axis=1)
    return {f"{name} centre": float(ranked[:, rank].mean())
            for name, rank in (("nearest", 0), ("2nd", 1), ("5th", 4))}  # fmt: skip


def clusters_of_ten(
    corpus: np.ndarray, queries: np.ndarray, truth: np.ndarray, centres: np.ndarray
) -> dict[str, float]:
    """Where a query's exact ten (`truth`) lie among the fitted clusters (each row's cluster
    its nearest centre): how many clusters they fall in, and the share in the query's own. A
    real held-out chunk's ten reach across several clusters; ten in one clump are easy for a
    graph index to find."""
    row_cluster = (corpus @ centres.T).argmax(axis=1)
    query_cluster = (queries @ centres.T).argmax(axis=1)
    of_ten = row_cluster[truth]
    return {"clusters of the ten": float(np.mean([len(set(row)) for row in of_ten.tolist()])),
            "ten in own cluster": float((of_ten == query_cluster[:, None]).mean())}  # fmt: skip


def neighbourhood(corpus: np.ndarray, queries: np.ndarray, cosines: np.ndarray) -> Neighbourhood:
    rng = np.random.default_rng(9)
    a, b = rng.integers(len(corpus), size=(2, 200_000))
    keep = a != b
    pairs = np.einsum("ij,ij->i", corpus[a[keep]], corpus[b[keep]])
    return Neighbourhood(float(pairs.mean()), float(pairs.std()), float(cosines[:, 0].mean()),
                         float(cosines[:, 0].std()), float(cosines[:, 9].mean()),
                         float(cosines[:, 9].std()))  # fmt: skip


# ------------------------------------------------------------------ HNSW recall on pgvector

CREATE_TABLE = "CREATE TABLE {table} (id integer PRIMARY KEY, embedding vector({dimension}))"
COPY_ROWS = "COPY {table} (id, embedding) FROM STDIN (FORMAT BINARY)"
CREATE_INDEX = """
CREATE INDEX ON {table} USING hnsw (embedding vector_cosine_ops)
WITH (m = {m}, ef_construction = {ef_construction})"""
# pgvector's HNSW search with a fixed breadth and no iterative scan: the index alone.
NEAREST = "SELECT id FROM {table} ORDER BY embedding <=> %(query)s LIMIT {k}"


def hnsw_recall(
    url: str,
    table: str,
    corpus: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    ef_searches: Sequence[int] = EF_SEARCHES,
    m: int = 16,
    ef_construction: int = 64,
    timings: dict[int, float] | None = None,
) -> dict[int, float]:
    """Mean recall@10 of pgvector's HNSW index over `corpus` against the exact `truth`, at each
    `ef_search` (`timings`: filled with each breadth's median ms a query, client wall, and
    with the build's seconds under key 0). The table is made anew and dropped afterwards."""
    import psycopg

    from kbmcp.store.postgres.vectors import Float32Vector, register_vector

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(CREATE_TABLE.format(table=table, dimension=corpus.shape[1]))
        oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()[0]
        with conn.cursor() as cur, cur.copy(COPY_ROWS.format(table=table)) as copy:
            copy.set_types(["integer", oid])
            for i, row in enumerate(corpus):
                copy.write_row((i, Float32Vector(row.astype(np.float32).tobytes())))
        started = time.perf_counter()
        conn.execute(CREATE_INDEX.format(table=table, m=m, ef_construction=ef_construction))
        if timings is not None:
            timings[0] = time.perf_counter() - started
        conn.execute(f"ANALYZE {table}")
        recall = {}
        for ef in ef_searches:
            conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            found, waited = [], []
            for query, want in zip(queries, truth, strict=True):
                vector = Float32Vector(query.astype(np.float32).tobytes())
                begun = time.perf_counter()
                rows = conn.execute(NEAREST.format(table=table, k=truth.shape[1]),
                                    {"query": vector}).fetchall()  # fmt: skip
                waited.append((time.perf_counter() - begun) * 1000)
                found.append(len({r[0] for r in rows} & set(want.tolist())) / len(want))
            recall[ef] = statistics.mean(found)
            if timings is not None:
                timings[ef] = statistics.median(waited)
        conn.execute(f"DROP TABLE {table}")
    return recall


# ------------------------------------------------------------------ the check


def set_tightness(rows: np.ndarray) -> float:
    """The mean cosine of a row to its nearest other row of the set (SET_SAMPLE rows, a fixed
    sample): how tight the set's own strands and documents are."""
    sample = np.random.default_rng(11).choice(len(rows), min(SET_SAMPLE, len(rows)), replace=False)
    _, cosines = exact_top(rows, rows[sample], k=2)
    return float(cosines[:, 1].mean())


@dataclass(frozen=True)
class Tried:
    """One drawn set of the fit's grid: its queries' neighbourhood, its own tightness and its
    queries' mean cosine to their nearest fitted centre."""

    shape: Neighbourhood
    tightness: float
    nearest_centre: float


def draw_and_measure(model: ShapeModel, rows: int, queries: int) -> Tried:
    generator = ShapeGenerator(model, rows)
    corpus, asked = generator.corpus(), generator.queries(queries)
    _, cosines = exact_top(corpus, asked)
    centre = nearest_centres(asked, model.centres)["nearest centre"]
    return Tried(neighbourhood(corpus, asked, cosines), set_tightness(corpus), centre)


@dataclass(frozen=True)
class Target:
    """The real figures the fit chooses its numbers by."""

    shape: Neighbourhood  # the held-out chunks' neighbourhood in the real set
    tightness: float  # the real set's own (`set_tightness`)
    nearest_centre: float  # the held-out chunks' mean cosine to their nearest fitted centre


Choice = tuple[float, float, float, float]  # strand share, spread, relative share, query spread


def choose_shape(
    model: ShapeModel, rows: int, holdout: int, target: Target
) -> tuple[ShapeModel, dict[Choice, Tried]]:
    """The four free numbers, each chosen by the figure it moves most (on a tie the smaller):
    the strands' share and the spread together by the set's own tightness and the queries'
    tenth neighbour (with FIRST_RELATIVE_SHARE of the queries related, at FIRST_QUERY_SPREAD),
    then the queries' relative share by their first neighbour and their own spread by their
    nearest centre, twice (each moves the other's figure a little). Those four means are
    fitted, not checked."""
    tried: dict[Choice, Tried] = {}

    def measured(choice: Choice) -> Tried:
        if choice not in tried:
            share, spread, related, query_spread = choice
            chosen = model.with_spread(spread, share, related, query_spread)
            tried[choice] = draw_and_measure(chosen, rows, holdout)
        return tried[choice]

    def first_miss(choice: Choice) -> tuple[float, Choice]:
        found = measured(choice)
        return (abs(found.tightness - target.tightness)
                + abs(found.shape.tenth_mean - target.shape.tenth_mean), choice)  # fmt: skip

    grid = [(share, spread, FIRST_RELATIVE_SHARE, FIRST_QUERY_SPREAD)
            for share in STRAND_SHARES for spread in SPREADS]  # fmt: skip
    share, spread, related, query_spread = min(grid, key=first_miss)
    for _ in range(2):
        related = min(RELATIVE_SHARES, key=lambda value: (abs(
            measured((share, spread, value, query_spread)).shape.first_mean
            - target.shape.first_mean), value))  # fmt: skip
        query_spread = min(QUERY_SPREADS, key=lambda value: (abs(
            measured((share, spread, related, value)).nearest_centre
            - target.nearest_centre), value))  # fmt: skip
    return model.with_spread(spread, share, related, query_spread), tried


def median_recall(
    args: argparse.Namespace, table: str, corpus: np.ndarray, queries: np.ndarray, truth: np.ndarray
) -> dict[int, float]:
    """Each ef_search's median recall over `args.builds` builds of the index: one build's
    recall at ef_search 10 moves by a few hundredths from build to build (pgvector draws each
    row's graph level at random), as much as the check's tolerance."""
    builds = [hnsw_recall(args.db, table, corpus, queries, truth) for _ in range(args.builds)]
    return {ef: statistics.median(b[ef] for b in builds) for ef in builds[0]}


def held_out(real: Any, count: int) -> np.ndarray:
    """Rows of whole documents drawn at random until at least `count` rows (at most `count`
    of them kept): a query's document is never in the corpus, as a question's text is not."""
    rng = np.random.default_rng(1)
    documents = real.documents if real.documents is not None else np.arange(len(real.vectors))
    chosen: list[int] = []
    for document in rng.permutation(np.unique(documents)):
        chosen.extend(np.flatnonzero(documents == document).tolist())
        if len(chosen) >= count:
            break
    return np.sort(rng.permutation(chosen)[:count])


def tune(url: str, model: ShapeModel, rows: int, queries: int, grid: str) -> None:
    """Recall@10 and median ms a query of pgvector's HNSW over `rows` drawn rows, for each
    `m/ef_construction` of `grid` ("16/64,24/128") and each ef_search of TUNE_EF_SEARCHES."""
    generator = ShapeGenerator(model, rows)
    corpus, asked = generator.corpus(), generator.queries(queries)
    truth, _ = exact_top(corpus, asked)
    heads = "".join(f"{f'ef {e}':>16}" for e in TUNE_EF_SEARCHES)
    print(f"{'m/ef_construction':<20}{'build s':>9}{heads}")
    for pair in grid.split(","):
        m, construction = (int(v) for v in pair.split("/"))
        timings: dict[int, float] = {}
        recall = hnsw_recall(url, "shape_tune", corpus, asked, truth, TUNE_EF_SEARCHES, m,
                             construction, timings)  # fmt: skip
        cells = "".join(f"{recall[e]:>9.3f}{timings[e]:>5.1f}ms" for e in TUNE_EF_SEARCHES)
        print(f"{pair:<20}{timings[0]:>9.0f}{cells}", flush=True)


def main() -> None:
    from real_vectors import DEFAULT_CACHE, find_cached, load_real

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="A PostgreSQL URL (pgvector) for HNSW.")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--holdout", type=int, default=500, help="Real chunks kept as queries.")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    parser.add_argument(
        "--builds", type=int, default=15, help="HNSW builds a curve (its median is compared)."
    )
    parser.add_argument(
        "--out", type=Path, help="Write the fitted model here (default: CACHE/shape-model.npz)."
    )
    parser.add_argument(
        "--tune",
        type=int,
        metavar="ROWS",
        help="Instead of the check: HNSW recall and time over ROWS rows drawn from the fitted "
        "model (--model), for each m/ef_construction of --grid.",
    )
    parser.add_argument(
        "--crossed",
        action="store_true",
        help="Also the crossed curves: drawn queries in the real set, the real held-out "
        "chunks in the drawn set (which side of the model the index's difficulty is in).",
    )
    parser.add_argument("--model", type=Path, help="With --tune: the model file.")
    parser.add_argument("--grid", default="16/64,16/128,24/128", help="With --tune.")
    args = parser.parse_args()
    if args.tune:
        model = ShapeModel.load(args.model or args.cache / "shape-model.npz")
        tune(args.db, model, args.tune, min(args.holdout, 300), args.grid)
        return
    started = time.perf_counter()
    real = load_real(find_cached(args.cache, "chunks"))
    real_queries = load_real(find_cached(args.cache, "queries")).vectors
    held = held_out(real, args.holdout)
    kept = np.setdiff1d(np.arange(len(real.vectors)), held)
    corpus, queries = real.vectors[kept], real.vectors[held]
    documents = real.documents[kept] if real.documents is not None else None
    model = fit_shape(corpus, documents=documents)
    print(f"fitted {len(corpus)} real rows: {len(model.centres)} clusters "
          f"({time.perf_counter() - started:.0f}s)", flush=True)  # fmt: skip
    model.save(args.out or args.cache / "shape-model.npz")
    real_ids, real_cosines = exact_top(corpus, queries)
    real_shape = neighbourhood(corpus, queries, real_cosines)
    real_tightness = set_tightness(corpus)
    real_centre = nearest_centres(queries, model.centres)["nearest centre"]
    target = Target(real_shape, real_tightness, real_centre)
    model, tried = choose_shape(model, len(corpus), args.holdout, target)
    print(f"tangents shrunk by slope {model.tangent_slope:.3f}; strands of "
          f"{model.strand_rows:.2f} rows; the real set's nearest other row "
          f"{real_tightness:.3f}")  # fmt: skip
    for (share, spread, related, query_spread), found in tried.items():
        first, tenth = found.shape.first_mean, found.shape.tenth_mean
        print(f"  strand share {share:.2f}, spread {spread:.2f}, related queries "
              f"{related:.1f}, query spread {query_spread:.1f}: set's nearest row "
              f"{found.tightness:.3f}, queries' 1st neighbour {first:.3f}, 10th {tenth:.3f}, "
              f"nearest centre {found.nearest_centre:.3f}")  # fmt: skip
    model.save(args.out or args.cache / "shape-model.npz")
    generator = ShapeGenerator(model, len(corpus))
    drawn, drawn_queries = generator.corpus(), generator.queries(args.holdout)
    drawn_ids, drawn_cosines = exact_top(drawn, drawn_queries)
    drawn_shape = neighbourhood(drawn, drawn_queries, drawn_cosines)
    asked_ids, asked_cosines = exact_top(corpus, real_queries)
    asked_shape = neighbourhood(corpus, real_queries, asked_cosines)
    print(f"spread {model.spread}, strand share {model.strand_share}, related queries "
          f"{model.relative_share}, query spread {model.query_spread}; HNSW recall on "
          f"pgvector ...", flush=True)  # fmt: skip
    curves = {
        "real chunks": median_recall(args, "shape_real", corpus, queries, real_ids),
        "drawn": median_recall(args, "shape_drawn", drawn, drawn_queries, drawn_ids),
        "real questions": median_recall(args, "shape_real", corpus, real_queries, asked_ids),
    }
    if args.crossed:
        crossed_ids, _ = exact_top(corpus, drawn_queries)
        curves["real set, drawn queries"] = median_recall(
            args, "shape_real", corpus, drawn_queries, crossed_ids
        )
        crossed_ids, _ = exact_top(drawn, queries)
        curves["drawn set, real chunks"] = median_recall(
            args, "shape_drawn", drawn, queries, crossed_ids
        )
    report = {
        "rows": len(corpus), "clusters": len(model.centres), "spread": model.spread,
        "strand share": model.strand_share, "strand rows": model.strand_rows,
        "related queries": model.relative_share, "query spread": model.query_spread,
        "bridge reach": model.bridge_reach,
        "set's nearest other row (fitted)": {"real chunks": real_tightness,
                                             "drawn": set_tightness(drawn)},
        "tangent slope": model.tangent_slope,
        "queries": args.holdout, "real questions": len(real_queries),
        "shape": {"real chunks": real_shape.figures(), "drawn": drawn_shape.figures(),
                  "real questions": asked_shape.figures()},
        "tenth above background (sd)": {"real chunks": real_shape.tenth_above_background,
                                        "drawn": drawn_shape.tenth_above_background,
                                        "real questions": asked_shape.tenth_above_background},
        "hnsw recall@10": {name: {str(k): v for k, v in c.items()} for name, c in curves.items()},
        "queries among the centres": {
            "real chunks": nearest_centres(queries, model.centres)
            | clusters_of_ten(corpus, queries, real_ids, model.centres),
            "drawn": nearest_centres(drawn_queries, model.centres)
            | clusters_of_ten(drawn, drawn_queries, drawn_ids, model.centres),
            "real questions": nearest_centres(real_queries, model.centres)
            | clusters_of_ten(corpus, real_queries, asked_ids, model.centres)},
    }  # fmt: skip
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    failed = check_failures(report)
    print("check: " + ("passed" if not failed else "FAILED: " + "; ".join(failed)))
    if failed:
        raise SystemExit(1)


def check_failures(report: dict[str, Any]) -> list[str]:
    """Each figure of the drawn set further than TOLERANCE from the real chunks' one."""
    failed = []
    real, drawn = report["shape"]["real chunks"], report["shape"]["drawn"]
    for name in real:
        if abs(real[name] - drawn[name]) > TOLERANCE:
            failed.append(f"{name} {drawn[name]:.3f} against {real[name]:.3f}")
    among = report["queries among the centres"]
    # (the nearest centre is fitted; where the ten lie is reported: the model is known to miss
    # it, 2.7 clusters against 4.4, docs/scale-out.md)
    for name in ("2nd centre", "5th centre"):
        real_value, drawn_value = among["real chunks"][name], among["drawn"][name]
        if abs(real_value - drawn_value) > TOLERANCE:
            failed.append(f"{name} {drawn_value:.3f} against {real_value:.3f}")
    curves = report["hnsw recall@10"]
    for ef, value in curves["real chunks"].items():
        if abs(value - curves["drawn"][ef]) > TOLERANCE:
            failed.append(f"recall at ef_search {ef} {curves['drawn'][ef]:.3f} against {value:.3f}")
    return failed


def print_report(report: dict[str, Any]) -> None:
    names = list(report["shape"])
    print(f"{'':<22}" + "".join(f"{n:>16}" for n in names))
    for figure in report["shape"]["real chunks"]:
        print(f"{figure:<22}" + "".join(f"{report['shape'][n][figure]:>16.3f}" for n in names))
    tight = report["set's nearest other row (fitted)"]
    print(f"{'set nearest row':<22}{tight['real chunks']:>16.3f}{tight['drawn']:>16.3f}")
    above = report["tenth above background (sd)"]
    print(f"{'10th above pairs (sd)':<22}" + "".join(f"{above[n]:>16.2f}" for n in names))
    for figure in report["queries among the centres"]["real chunks"]:
        print(f"{figure:<22}" + "".join(
            f"{report['queries among the centres'][n][figure]:>16.3f}" for n in names))  # fmt: skip
    for ef in report["hnsw recall@10"]["real chunks"]:
        print(f"{'recall@10, ef ' + ef:<22}"
              + "".join(f"{report['hnsw recall@10'][n][ef]:>16.3f}" for n in names))  # fmt: skip
    crossed = [n for n in report["hnsw recall@10"] if n not in names]
    for name in crossed:  # --crossed: one line each
        curve = report["hnsw recall@10"][name]
        print(f"recall@10, {name}: " + ", ".join(f"ef {ef} {v:.3f}" for ef, v in curve.items()))


if __name__ == "__main__":
    main()
