"""Graded-relevance retrieval metrics, computed as BEIR / pytrec_eval compute them.

A ranking is a sequence of document ids, best first. Duplicate ids count only at their first
occurrence: the ranking is de-duplicated (order kept) before the cut-off, as a pytrec_eval run
(a dict doc id -> score) cannot hold a document twice. A document is relevant when its grade
is > 0; unjudged documents have grade 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

METRIC_KEYS: tuple[str, ...] = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def _top_k(ranked_ids: Sequence[str], k: int) -> list[str]:
    """The first ``k`` distinct ids of the ranking, in order."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    seen: set[str] = set()
    top: list[str] = []
    for doc_id in ranked_ids:
        if len(top) >= k:
            break
        if doc_id not in seen:
            seen.add(doc_id)
            top.append(doc_id)
    return top


def _dcg(grades: Sequence[int]) -> float:
    """Sum of grade / log2(rank + 1) over ranks 1..len(grades) (linear gain)."""
    return sum(grade / math.log2(rank + 1) for rank, grade in enumerate(grades, start=1))


def _relevant(qrels: Mapping[str, int]) -> set[str]:
    return {doc_id for doc_id, grade in qrels.items() if grade > 0}


def ndcg_at_k(ranked_ids: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k as pytrec_eval's ``ndcg_cut_k``; 0.0 when no document is relevant.

    The ideal DCG is that of the judged grades > 0 sorted descending, cut at ``k``.
    """
    ideal = sorted((grade for grade in qrels.values() if grade > 0), reverse=True)[:k]
    idcg = _dcg(ideal)
    if idcg == 0.0:
        return 0.0
    gains = [max(qrels.get(doc_id, 0), 0) for doc_id in _top_k(ranked_ids, k)]
    return _dcg(gains) / idcg


def recall_at_k(ranked_ids: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """|relevant in top k| / |relevant|; 0.0 when no document is relevant."""
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    found = sum(1 for doc_id in _top_k(ranked_ids, k) if doc_id in relevant)
    return found / len(relevant)


def mrr_at_k(ranked_ids: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """1 / rank of the first relevant document within the top k, else 0.0."""
    relevant = _relevant(qrels)
    for rank, doc_id in enumerate(_top_k(ranked_ids, k), start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def query_metrics(ranked_ids: Sequence[str], qrels: Mapping[str, int]) -> dict[str, float]:
    """The METRIC_KEYS metrics of one query."""
    return {
        "ndcg@10": ndcg_at_k(ranked_ids, qrels, 10),
        "recall@10": recall_at_k(ranked_ids, qrels, 10),
        "recall@100": recall_at_k(ranked_ids, qrels, 100),
        "mrr@10": mrr_at_k(ranked_ids, qrels, 10),
    }


def summarize(per_query: list[dict[str, float]]) -> dict[str, float]:
    """Mean of each metric over the queries; every dict must have the same keys; {} if empty."""
    if not per_query:
        return {}
    keys = list(per_query[0])
    for index, row in enumerate(per_query):
        if set(row) != set(keys):
            raise ValueError(f"per_query[{index}] has keys {sorted(row)}, expected {sorted(keys)}")
    return {key: math.fsum(row[key] for row in per_query) / len(per_query) for key in keys}


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) with linear interpolation, like numpy's default method."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def evaluate_run(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """Mean METRIC_KEYS over the qrels queries with a relevant document.

    A query missing from ``run`` scores 0; run queries absent from ``qrels`` are ignored.
    All metrics are 0.0 when no query has a relevant document.
    """
    judged = [qid for qid, grades in qrels.items() if any(g > 0 for g in grades.values())]
    per_query = [query_metrics(run.get(qid, ()), qrels[qid]) for qid in judged]
    if not per_query:
        return dict.fromkeys(METRIC_KEYS, 0.0)
    return summarize(per_query)
