"""Fusing the channels into one ranking. Pure functions: no database, no I/O.

- lexical / semantic: the channel's own score (bm25 negated; cosine similarity).
- hybrid: `alpha * lexical + (1 - alpha) * semantic`, each channel min-max normalised over its
  own candidate set ((s - min) / (max - min); 1.0 when every candidate scores the same). Min-max
  was chosen over z-scores because bm25 has no fixed range and its distribution over a few dozen
  candidates is far from normal, and over dividing by the max because bm25 and cosine both have
  offsets (a cosine of 0.2 is "unrelated" for MiniLM). A chunk missing from a channel gets 0 from
  it: it is below that channel's worst candidate.
- rrf: the sum over channels of 1 / (rrf_k + rank), ranks starting at 1.

Every ordering breaks ties by the chunk's public id, so equal inputs give identical outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Ranked:
    """A chunk in one channel: its rank (1-based, by score then public id) and score."""

    chunk_id: int
    rank: int
    score: float


@dataclass(frozen=True)
class Fused:
    chunk_id: int
    public_id: str
    lexical: Ranked | None
    semantic: Ranked | None
    score: float


def rank_channel(
    chunk_ids: Sequence[int], scores: Sequence[float], public_ids: Mapping[int, str]
) -> list[Ranked]:
    order = sorted(zip(chunk_ids, scores, strict=True), key=lambda p: (-p[1], public_ids[p[0]]))
    return [Ranked(chunk_id, rank, score) for rank, (chunk_id, score) in enumerate(order, 1)]


def min_max(ranked: Sequence[Ranked]) -> dict[int, float]:
    if not ranked:
        return {}
    scores = [r.score for r in ranked]
    low, high = min(scores), max(scores)
    if high == low:
        return {r.chunk_id: 1.0 for r in ranked}
    return {r.chunk_id: (r.score - low) / (high - low) for r in ranked}


def fuse(
    mode: str,
    lexical: Sequence[Ranked],
    semantic: Sequence[Ranked],
    public_ids: Mapping[int, str],
    *,
    alpha: float,
    rrf_k: int,
) -> list[Fused]:
    by_lexical = {r.chunk_id: r for r in lexical}
    by_semantic = {r.chunk_id: r for r in semantic}
    scores = _scores(mode, lexical, semantic, alpha=alpha, rrf_k=rrf_k)
    fused = [
        Fused(chunk_id, public_ids[chunk_id], by_lexical.get(chunk_id),
              by_semantic.get(chunk_id), score)
        for chunk_id, score in scores.items()
    ]  # fmt: skip
    fused.sort(key=lambda f: (-f.score, f.public_id))
    return fused


def _scores(
    mode: str,
    lexical: Sequence[Ranked],
    semantic: Sequence[Ranked],
    *,
    alpha: float,
    rrf_k: int,
) -> dict[int, float]:
    if mode == "lexical":
        return {r.chunk_id: r.score for r in lexical}
    if mode == "semantic":
        return {r.chunk_id: r.score for r in semantic}
    if mode == "rrf":
        scores: dict[int, float] = {}
        for channel in (lexical, semantic):
            for r in channel:
                scores[r.chunk_id] = scores.get(r.chunk_id, 0.0) + 1.0 / (rrf_k + r.rank)
        return scores
    if mode == "hybrid":
        lex, sem = min_max(lexical), min_max(semantic)
        return {
            chunk_id: alpha * lex.get(chunk_id, 0.0) + (1.0 - alpha) * sem.get(chunk_id, 0.0)
            for chunk_id in lex.keys() | sem.keys()
        }
    raise ValueError(f"unknown mode {mode!r}")
