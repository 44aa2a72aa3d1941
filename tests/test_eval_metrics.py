"""Tests for kbmcp.eval: graded-relevance metrics and the BEIR loader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kbmcp.eval.beir import BeirDocument, BeirQuery, load_beir
from kbmcp.eval.metrics import (
    evaluate_run,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    recall_at_k,
    summarize,
)

GRADED = {"a": 2, "b": 1, "c": 0}
SCIFACT = Path("/work/shared/data/scifact")


# --- nDCG -----------------------------------------------------------------------------------


def test_ndcg_graded_hand_computed() -> None:
    # ranking [c, a, x, b]: gains 0, 2, 0, 1 at ranks 1..4
    # DCG  = 0/log2(2) + 2/log2(3) + 0/log2(4) + 1/log2(5) = 1.26186 + 0.43068 = 1.69254
    # IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.63093 = 2.63093  ->  nDCG = 0.64332
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 2 / 1 + 1 / math.log2(3)
    assert ndcg_at_k(["c", "a", "x", "b"], GRADED, k=10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["c", "a", "x", "b"], GRADED) == pytest.approx(0.643322, abs=1e-6)


def test_ndcg_perfect_ranking_is_one() -> None:
    assert ndcg_at_k(["a", "b", "c"], GRADED) == pytest.approx(1.0)


def test_ndcg_cutoff() -> None:
    # k=2: top 2 = [c, a] -> DCG = 2/log2(3) = 1.26186; IDCG@2 = 2 + 1/log2(3) -> 0.47962
    assert ndcg_at_k(["c", "a", "x", "b"], GRADED, k=2) == pytest.approx(
        (2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
    # k=1: top 1 = [c], grade 0 -> 0
    assert ndcg_at_k(["c", "a", "x", "b"], GRADED, k=1) == 0.0


def test_ndcg_ideal_is_cut_at_k_like_pytrec_eval() -> None:
    # three relevant docs, k=1: DCG@1 = 1/log2(2) = 1, IDCG@1 = 1 (not 1 + 1/log2 3 + 1/2) -> 1.0
    assert ndcg_at_k(["a"], {"a": 1, "b": 1, "c": 1}, k=1) == pytest.approx(1.0)


def test_ndcg_no_relevant_docs() -> None:
    assert ndcg_at_k(["a", "b"], {"a": 0, "b": 0}) == 0.0
    assert ndcg_at_k(["a", "b"], {}) == 0.0
    assert ndcg_at_k([], GRADED) == 0.0


def test_ndcg_duplicates_count_at_first_occurrence() -> None:
    # [a, a, b] is read as [a, b]: DCG = 2/1 + 1/log2(3) = IDCG -> 1.0
    assert ndcg_at_k(["a", "a", "b"], GRADED) == pytest.approx(1.0)
    # [c, a, a, a] -> [c, a]: DCG = 2/log2(3), counted once
    assert ndcg_at_k(["c", "a", "a", "a"], GRADED) == pytest.approx(
        (2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )


# --- recall / MRR ---------------------------------------------------------------------------


def test_recall_at_k() -> None:
    # relevant = {a, b} (c has grade 0); [c, a, x, b]: top 2 holds a -> 1/2; top 4 -> 2/2
    assert recall_at_k(["c", "a", "x", "b"], GRADED, k=2) == pytest.approx(0.5)
    assert recall_at_k(["c", "a", "x", "b"], GRADED, k=4) == pytest.approx(1.0)
    assert recall_at_k(["c"], GRADED, k=10) == 0.0
    assert recall_at_k(["a"], {"a": 0}, k=10) == 0.0


def test_recall_at_100_vs_10() -> None:
    # relevant r1 at rank 1, r2 at rank 50, r3 at rank 150
    ranking = [f"n{i}" for i in range(200)]
    ranking[0], ranking[49], ranking[149] = "r1", "r2", "r3"
    qrels = {"r1": 1, "r2": 3, "r3": 1}
    assert recall_at_k(ranking, qrels, k=10) == pytest.approx(1 / 3)
    assert recall_at_k(ranking, qrels, k=100) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, qrels, k=200) == pytest.approx(1.0)


def test_recall_duplicates() -> None:
    # [a, a, b] -> [a, b]: both relevant docs in the top 2
    assert recall_at_k(["a", "a", "b"], GRADED, k=2) == pytest.approx(1.0)


def test_mrr_at_k() -> None:
    # first relevant doc (grade > 0) is a at rank 2; c (grade 0) does not count
    assert mrr_at_k(["c", "a", "x", "b"], GRADED) == pytest.approx(1 / 2)
    assert mrr_at_k(["x", "y", "b"], GRADED) == pytest.approx(1 / 3)
    assert mrr_at_k(["a"], GRADED) == pytest.approx(1.0)
    # relevant only at rank 11 -> outside the top 10
    assert mrr_at_k([f"n{i}" for i in range(10)] + ["a"], GRADED, k=10) == 0.0
    assert mrr_at_k(["x", "y", "b"], GRADED, k=2) == 0.0
    # duplicates: [x, x, a] -> [x, a] -> 1/2
    assert mrr_at_k(["x", "x", "a"], GRADED) == pytest.approx(1 / 2)
    assert mrr_at_k(["a"], {}) == 0.0


# --- aggregation ----------------------------------------------------------------------------


def test_evaluate_run_missing_query_scores_zero() -> None:
    qrels = {
        "q1": {"a": 1},  # perfectly answered: all metrics 1
        "q2": {"b": 2, "c": 1},  # missing from the run: all metrics 0
        "q3": {"d": 0},  # no relevant doc: excluded from the mean
    }
    run = {"q1": ["a", "z"], "q9": ["z"]}  # q9 is not judged: ignored
    result = evaluate_run(run, qrels)
    assert list(result) == ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
    assert result == pytest.approx(
        {"ndcg@10": 0.5, "recall@10": 0.5, "recall@100": 0.5, "mrr@10": 0.5}
    )


def test_evaluate_run_mixed_values() -> None:
    # q1: [c, a, x, b] on GRADED -> ndcg 0.643322, recall 1, mrr 1/2
    # q2: relevant e at rank 12 -> ndcg@10 0, recall@10 0, recall@100 1, mrr 0
    run = {"q1": ["c", "a", "x", "b"], "q2": [f"n{i}" for i in range(11)] + ["e"]}
    result = evaluate_run(run, {"q1": GRADED, "q2": {"e": 1}})
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 2 + 1 / math.log2(3)
    assert result["ndcg@10"] == pytest.approx((dcg / idcg + 0) / 2)
    assert result["recall@10"] == pytest.approx((1 + 0) / 2)
    assert result["recall@100"] == pytest.approx((1 + 1) / 2)
    assert result["mrr@10"] == pytest.approx((0.5 + 0) / 2)


def test_evaluate_run_without_relevant_queries() -> None:
    assert evaluate_run({}, {"q": {"a": 0}}) == {
        "ndcg@10": 0.0,
        "recall@10": 0.0,
        "recall@100": 0.0,
        "mrr@10": 0.0,
    }


def test_summarize() -> None:
    rows = [{"m": 1.0, "n": 0.0}, {"m": 0.0, "n": 0.5}]
    assert summarize(rows) == pytest.approx({"m": 0.5, "n": 0.25})
    assert summarize([]) == {}
    with pytest.raises(ValueError):
        summarize([{"m": 1.0}, {"n": 1.0}])


def test_percentile() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    # sorted [1, 2, 3, 4]; p50: position 3*0.50 = 1.5 -> 2 + 0.5*(3-2) = 2.5
    assert percentile(values, 50) == pytest.approx(2.5)
    # p95: position 3*0.95 = 2.85 -> 3 + 0.85*(4-3) = 3.85
    assert percentile(values, 95) == pytest.approx(3.85)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 95) == 7.0
    sample = [0.3, 12.0, 5.5, 1.25, 8.0, 2.0, 40.0]
    for p in (0, 10, 50, 90, 95, 99, 100):
        assert percentile(sample, p) == pytest.approx(float(np.percentile(sample, p)))
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile(values, 101)


# --- BEIR loader ----------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _write_dataset(root: Path, qrels_name: str = "qrels.tsv") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _write_jsonl(
        root / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {"x": 1}},
            {"_id": "d2", "title": "", "text": "Dogs bark."},
            {"_id": "d3", "title": "Birds", "text": "Birds sing."},
        ],
    )
    _write_jsonl(
        root / "queries.jsonl",
        [
            {"_id": "q1", "text": "what purrs"},
            {"_id": "q2", "text": "what barks"},
            {"_id": "q3", "text": "only judged not relevant"},
            {"_id": "q4", "text": "not judged at all"},
        ],
    )
    qrels_path = root / qrels_name
    qrels_path.parent.mkdir(parents=True, exist_ok=True)
    qrels_path.write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t0\nq2\td2\t1\nq3\td3\t0\n",
        encoding="utf-8",
    )
    return root


def test_load_beir_tiny(tmp_path: Path) -> None:
    data = load_beir(_write_dataset(tmp_path / "tiny"))
    assert data.name == "tiny"
    assert data.corpus == [
        BeirDocument("d1", "Cats", "Cats purr."),
        BeirDocument("d2", "", "Dogs bark."),
        BeirDocument("d3", "Birds", "Birds sing."),
    ]
    # q3 (only grade-0 judgements) and q4 (no judgements) are excluded
    assert data.queries == [BeirQuery("q1", "what purrs"), BeirQuery("q2", "what barks")]
    assert data.qrels == {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}


def test_load_beir_qrels_subdirectory(tmp_path: Path) -> None:
    data = load_beir(_write_dataset(tmp_path / "sub", qrels_name="qrels/test.tsv"))
    assert [q.id for q in data.queries] == ["q1", "q2"]


def test_load_beir_malformed_json_names_line(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "bad")
    lines = (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = '{"_id": "d2", "text": '
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"corpus\.jsonl:2: malformed JSON") as info:
        load_beir(root)
    assert "\n" not in str(info.value)


def test_load_beir_missing_field_names_line(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "nofield")
    with (root / "queries.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "q5"}) + "\n")
    with pytest.raises(ValueError, match=r"queries\.jsonl:5: .*'text'"):
        load_beir(root)


def test_load_beir_malformed_qrels_line(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "badqrels")
    with (root / "qrels.tsv").open("a", encoding="utf-8") as handle:
        handle.write("q2\td1\n")
    with pytest.raises(ValueError, match=r"qrels\.tsv:6: expected"):
        load_beir(root)
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"qrels\.tsv:2: score 'high'"):
        load_beir(root)


def test_load_beir_missing_files(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "missing")
    (root / "qrels.tsv").unlink()
    with pytest.raises(ValueError, match="no qrels file"):
        load_beir(root)
    root = _write_dataset(tmp_path / "missing2")
    (root / "corpus.jsonl").unlink()
    with pytest.raises(ValueError, match=r"corpus\.jsonl: file not found"):
        load_beir(root)


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason="SciFact not available")
def test_load_real_scifact() -> None:
    data = load_beir(SCIFACT)
    assert data.name == "scifact"
    assert len(data.corpus) == 5183
    assert len(data.queries) == 300
    assert len(data.qrels) == 300
    assert sum(len(grades) for grades in data.qrels.values()) == 339
    assert all(q.id in data.qrels for q in data.queries)
