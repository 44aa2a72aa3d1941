"""`kbmcp eval` end to end on a BEIR-format fixture written by the test (hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from beir_fixture import EXPECTED_LEXICAL, QRELS, write_fixture

from kbmcp.eval.beir import BeirDocument
from kbmcp.eval.metrics import METRIC_KEYS, evaluate_run
from kbmcp.service.evaluate import (
    EvalOptions,
    beir_id_from_path,
    collapse_to_documents,
    document_file_name,
    document_markdown,
    evaluate,
)
from kbmcp.service.listing import list_documents
from kbmcp.workspace import Workspace

QRELS_BY_QUERY: dict[str, dict[str, int]] = {}
for _q, _d, _g in QRELS:
    QRELS_BY_QUERY.setdefault(_q, {})[_d] = _g

# The chunk paths a perfect lexical engine returns (d01 and d05 with several chunks each).
FAKE_RANKING: dict[str, list[str]] = {
    "zorblat crystal luminescence": ["d01.md", "d01.md", "d02.md"],
    "velmorian harbor tides": ["d03.md", "d11.md"],
    "quintessor enzyme kinetics": ["d04.md"],
    "draxil migration": ["d05.md", "d05.md", "d05.md"],
    "frobnicate widgets": [],
    "quasar": ["d08.md", "notes/other.txt", "d07.md"],
}


class FakeSearch:
    """Stands in for the search service: a fixed ranking per query; records the requests."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, workspace: Workspace, principal: Any, request: Any) -> Any:
        self.requests.append(request)
        paths = FAKE_RANKING[request.query][: request.limit]
        return SimpleNamespace(results=[SimpleNamespace(path=p) for p in paths])


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    return write_fixture(tmp_path / "tinybeir")


def test_file_names_round_trip_any_id() -> None:
    for beir_id in ("4983", "doc/with/slash", "a b%c.md", "ünï"):
        assert beir_id_from_path(f"sub/{document_file_name(beir_id)}") == beir_id
    assert beir_id_from_path("notes/readme.txt") is None


def test_document_markdown_puts_the_title_on_one_heading_line() -> None:
    doc = BeirDocument(id="1", title="A\ntwo-line  title", text=" Body. ")
    assert document_markdown(doc) == "# A two-line title\n\nBody.\n"
    assert document_markdown(BeirDocument(id="2", title="", text="Only text")) == "Only text\n"


def test_collapse_keeps_the_best_chunk_of_each_document_in_order() -> None:
    paths = ["d2.md", "d1.md", "d2.md", "x/readme.txt", "d3.md", "d1.md"]
    assert collapse_to_documents(paths) == ["d2", "d1", "d3"]


def test_pipeline_ingests_runs_and_scores(workspace: Workspace, dataset_dir: Path) -> None:
    fake = FakeSearch()
    principal = workspace.local_principal()
    report = evaluate(
        workspace,
        principal,
        dataset_dir,
        options=EvalOptions(modes=("lexical", "rrf"), limit=50, rrf_k=7),
        search=fake,
    )
    assert report.knowledge_base == "beir-tinybeir"
    assert (report.documents, report.queries, report.ingest.reused) == (30, 6, False)
    paths = {d.path for d in list_documents(workspace, principal, limit=100).documents}
    assert {beir_id_from_path(p) for p in paths} == {f"d{i:02d}" for i in range(1, 31)}

    lexical = report.modes["lexical"]
    assert lexical.run["q1"] == ["d01", "d02"]
    assert lexical.run["q6"] == ["d08", "d07"]
    assert lexical.run["q5"] == []
    for key in METRIC_KEYS:
        assert lexical.metrics[key] == pytest.approx(EXPECTED_LEXICAL[key])
    assert {k: lexical.metrics[k] for k in METRIC_KEYS} == pytest.approx(
        evaluate_run(lexical.run, QRELS_BY_QUERY)
    )
    assert lexical.metrics["queries"] == 6
    assert 0 <= lexical.metrics["latency_ms_p50"] <= lexical.metrics["latency_ms_p95"]

    # 6 timed queries + 1 warm-up per mode, each scoped to the eval knowledge base.
    assert len(fake.requests) == 14
    assert {r.mode for r in fake.requests} == {"lexical", "rrf"}
    # rrf_k goes to the rrf mode only: the service refuses a fusion parameter of another mode.
    assert {(r.mode, r.limit, r.rrf_k) for r in fake.requests} == {
        ("lexical", 50, None),
        ("rrf", 50, 7),
    }
    assert {tuple(r.filters.knowledge_base_ids) for r in fake.requests} == {
        (report.knowledge_base_id,)
    }


def test_pipeline_reuses_a_knowledge_base_holding_the_corpus(
    workspace: Workspace, dataset_dir: Path
) -> None:
    principal = workspace.local_principal()
    options = EvalOptions(modes=("lexical",))
    first = evaluate(
        workspace, principal, dataset_dir, kb_name="t", options=options, search=FakeSearch()
    )
    second = evaluate(
        workspace, principal, dataset_dir, kb_name="t", options=options, search=FakeSearch()
    )
    assert first.ingest.reused is False and first.ingest.report is not None
    assert first.ingest.report.added == 30
    assert second.ingest.reused is True and second.ingest.report is None
    assert second.modes["lexical"].metrics == {
        **first.modes["lexical"].metrics,
        "latency_ms_p50": second.modes["lexical"].metrics["latency_ms_p50"],
        "latency_ms_p95": second.modes["lexical"].metrics["latency_ms_p95"],
    }


# --- through the CLI and the real search engine (hashing embedder) ---------------------------


def _cli_json(db: Path, *args: str) -> dict[str, Any]:
    from click.testing import CliRunner

    from kbmcp.cli import cli

    result = CliRunner().invoke(cli, ["--db", str(db), "eval", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_eval_end_to_end_lexical_matches_hand_computed(
    tmp_path: Path, dataset_dir: Path
) -> None:
    db = tmp_path / "eval.db"
    out = _cli_json(db, str(dataset_dir), "--mode", "lexical", "--mode", "semantic")
    assert (out["documents"], out["queries"], out["reused_knowledge_base"]) == (30, 6, False)
    lexical = out["modes"]["lexical"]
    assert set(lexical) == {*METRIC_KEYS, "latency_ms_p50", "latency_ms_p95", "queries"}
    assert {k: lexical[k] for k in METRIC_KEYS} == pytest.approx(EXPECTED_LEXICAL)
    assert set(out["modes"]) == {"lexical", "semantic"}

    again = _cli_json(db, str(dataset_dir), "--mode", "keyword")
    assert again["reused_knowledge_base"] is True
    assert {k: again["modes"]["lexical"][k] for k in METRIC_KEYS} == pytest.approx(EXPECTED_LEXICAL)


def test_service_run_agrees_with_evaluate_run(db_path: Path, dataset_dir: Path) -> None:
    from kbmcp.config import Settings

    with Workspace(Settings(db=db_path, embedder="hash")) as ws:
        report = evaluate(ws, ws.local_principal(), dataset_dir, options=EvalOptions())
    assert list(report.modes) == ["lexical", "semantic", "hybrid", "rrf"]
    for mode, result in report.modes.items():
        assert len(result.run) == 6, mode
        expected = evaluate_run(result.run, QRELS_BY_QUERY)
        assert {k: result.metrics[k] for k in METRIC_KEYS} == pytest.approx(expected), mode
    lexical = report.modes["lexical"].run
    assert lexical["q1"][:2] == ["d01", "d02"]
    assert lexical["q4"][0] == "d05"  # three chunks, one document
    assert lexical["q5"] == []
    assert lexical["q6"][:2] == ["d08", "d07"]


def test_cli_eval_table_and_bad_dataset(tmp_path: Path, dataset_dir: Path) -> None:
    from click.testing import CliRunner

    from kbmcp.cli import cli

    runner = CliRunner()
    db = str(tmp_path / "eval.db")
    result = runner.invoke(cli, ["--db", db, "eval", str(dataset_dir), "--mode", "lexical"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("tinybeir: 30 documents (ingested in knowledge base beir-tinybeir)")
    row = next(line for line in lines if line.startswith("lexical"))
    assert row.split()[1:5] == [
        f"{EXPECTED_LEXICAL[k]:.4f}" for k in ("ndcg@10", "recall@10", "recall@100", "mrr@10")
    ]
    (tmp_path / "broken").mkdir()
    bad = runner.invoke(cli, ["--db", db, "eval", str(tmp_path / "broken")])
    assert bad.exit_code != 0
    assert "qrels" in bad.output
