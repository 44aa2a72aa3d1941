"""`kbmcp eval` on a corpus of real files (corpus.paths): judgements name files, not chunks.

Also checks the committed docs-questions set (bench/docs-questions): every question is judged
and every judged file exists, so renaming a page of docs/ fails here, not silently in the eval.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.eval.beir import load_beir
from kbmcp.service.evaluate import EvalOptions, evaluate
from kbmcp.workspace import Workspace
from tests.cli_support import Run

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS_QUESTIONS = REPO_ROOT / "bench" / "docs-questions"
README = REPO_ROOT / "README.md"

PAGES = {
    "notes/herons.md": "# Herons\n\nHerons wait motionless in shallow water for fish.\n",
    "notes/owls.md": "# Owls\n\nOwls hunt mice at night and swallow them whole.\n",
    "notes/deep/swifts.md": "# Swifts\n\nSwifts sleep while flying and rarely land.\n",
    "notes/gulls.md": "# Gulls\n\nGulls steal chips on the pier.\n",
    "guide.md": "# Guide\n\nHow to watch birds: binoculars, patience, a notebook.\n",
}
QUESTIONS = {
    "q1": ("which bird waits in shallow water for fish", "notes/herons.md"),
    "q2": ("birds that sleep while flying", "notes/deep/swifts.md"),
    "q3": ("what do I need to watch birds", "guide.md"),
}


def write_dataset(root: Path, *, judged: dict[str, str] | None = None) -> Path:
    """A corpus of files under root/site and a dataset in root/set naming them by path."""
    for path, text in PAGES.items():
        (root / "site" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "site" / path).write_text(text, encoding="utf-8")
    dataset = root / "set"
    dataset.mkdir()
    (dataset / "corpus.paths").write_text(
        "# the pages, and the guide named on its own\n../site/notes\n../site/guide.md\n"
    )
    (dataset / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": text}) + "\n" for q, (text, _) in QUESTIONS.items())
    )
    judged = judged or {q: path for q, (_, path) in QUESTIONS.items()}
    (dataset / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{p}\t1\n" for q, p in judged.items())
    )
    return dataset


def test_corpus_ids_are_paths_under_the_deepest_common_folder(tmp_path: Path) -> None:
    data = load_beir(write_dataset(tmp_path))
    assert data.corpus == [] and data.files is not None
    assert data.files.root == (tmp_path / "site").resolve()
    assert data.files.paths == [(tmp_path / p).resolve() for p in ("site/notes", "site/guide.md")]
    assert data.files.corpus_id(str(tmp_path.resolve() / "site/notes/deep/swifts.md")) == (
        "notes/deep/swifts.md"
    )
    assert data.files.corpus_id("/elsewhere/x.md") is None


def test_bad_corpus_paths_are_one_line_errors(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path)
    (dataset / "corpus.paths").write_text("../site/notes\n../site/missing\n")
    with pytest.raises(ValueError, match=r"corpus.paths:2: '../site/missing' does not exist"):
        load_beir(dataset)
    (dataset / "corpus.paths").write_text("# nothing\n")
    with pytest.raises(ValueError, match="lists no paths"):
        load_beir(dataset)
    (dataset / "corpus.paths").write_text("../site/notes\n")
    (dataset / "corpus.jsonl").write_text('{"_id": "1", "text": "x"}\n')
    with pytest.raises(ValueError, match=r"both corpus\.jsonl and corpus\.paths"):
        load_beir(dataset)


def test_eval_ranks_files_and_follows_their_edits(workspace: Workspace, tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path)
    principal = workspace.local_principal()
    options = EvalOptions(modes=("lexical",))
    first = evaluate(workspace, principal, dataset, options=options)
    assert (first.documents, first.queries, first.ingest.reused) == (5, 3, False)
    run = first.modes["lexical"].run
    assert run["q1"][0] == "notes/herons.md" and run["q2"][0] == "notes/deep/swifts.md"
    assert set(run["q3"]) <= set(PAGES)
    assert "notes/owls.md" not in run["q1"]  # no word of the question, until it is edited
    assert first.modes["lexical"].metrics["mrr@10"] == 1.0

    again = evaluate(workspace, principal, dataset, options=options)
    assert again.ingest.reused is True  # nothing changed: nothing re-indexed

    # An edited page is re-indexed and ranked with its new text; a removed one leaves.
    (tmp_path / "site/notes/owls.md").write_text("# Owls\n\nOwls wait in shallow water.\n")
    (tmp_path / "site/notes/gulls.md").unlink()
    edited = evaluate(workspace, principal, dataset.parent / "set", options=options)
    assert edited.ingest.report is not None
    assert (edited.ingest.report.updated, edited.ingest.report.archived) == (1, 1)
    assert "notes/owls.md" in edited.modes["lexical"].run["q1"]


def test_a_judged_file_missing_from_the_corpus_is_an_error(
    kbmcp: Callable[..., Run], tmp_path: Path
) -> None:
    dataset = write_dataset(tmp_path, judged={"q1": "notes/herons.md", "q2": "notes/gone.md"})
    failed = kbmcp("--db", tmp_path / "eval.db", "eval", dataset)
    assert failed.code == 1 and failed.out == ""
    assert failed.err.strip() == (
        f"error: {dataset}: query 'q2' judges 'notes/gone.md', which is not a file of the "
        "corpus (corpus.paths)"
    )


def test_cli_eval_on_files_prints_the_table(kbmcp: Callable[..., Run], tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path)
    done = kbmcp("--db", tmp_path / "eval.db", "eval", dataset, "--mode", "lexical", "--json")
    assert done.code == 0, done.err
    report = done.json()
    assert (report["documents"], report["queries"]) == (5, 3)  # type: ignore[index]
    assert report["modes"]["lexical"]["mrr@10"] == 1.0  # type: ignore[index]


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """An eval report without what differs between two databases of the same corpus: the
    knowledge base's id (keyed per database) and the latencies."""
    modes = {
        mode: {key: value for key, value in metrics.items() if not key.startswith("latency")}
        for mode, metrics in report["modes"].items()
    }
    return {**report, "knowledge_base_id": None, "modes": modes}


def test_eval_gives_the_same_report_on_both_backends(
    kbmcp: Callable[..., Run],
    tmp_path: Path,
    fresh_postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`kbmcp --db postgresql://... eval` ingests the files there, searches there in every mode
    and finds the same documents, then reuses the knowledge base as on a file."""
    dataset = write_dataset(tmp_path)
    reports, runs = [], []
    for db in (tmp_path / "eval.db", fresh_postgres_url):
        first = kbmcp("--db", db, "eval", dataset, "--json")
        again = kbmcp("--db", db, "eval", dataset, "--json")
        assert first.code == again.code == 0, (first.err, again.err)
        reports.append((comparable(first.json()), comparable(again.json())))  # type: ignore[arg-type]
        settings = Settings(db=db, embedder="hash")
        with Workspace(settings, embedder=HashingEmbedder()) as workspace:
            report = evaluate(workspace, workspace.local_principal(), dataset)
            runs.append({mode: result.run for mode, result in report.modes.items()})
    assert reports[0] == reports[1]
    (first, again) = reports[1]
    assert first["reused_knowledge_base"] is False and again["reused_knowledge_base"] is True
    assert set(first["modes"]) == {"lexical", "semantic", "hybrid", "rrf"}
    assert first["modes"]["lexical"]["mrr@10"] == 1.0
    assert runs[0] == runs[1]


def test_the_docs_questions_set_judges_existing_files_it_does_not_quote() -> None:
    data = load_beir(DOCS_QUESTIONS)
    assert data.files is not None and data.files.root == REPO_ROOT
    assert len(data.queries) >= 40
    judged = {path for grades in data.qrels.values() for path in grades}
    assert {path for path in judged if not (REPO_ROOT / path).is_file()} == set()
    assert {q.id for q in data.queries} == set(data.qrels)
    # The questions are not quoted in their own corpus (a page quoting one would answer it).
    pages = [path.read_text().casefold() for path in [*REPO_ROOT.glob("docs/*.md"), README]]
    quoted = [q.text for q in data.queries if len(q.text.split()) > 3
              and any(q.text.casefold() in page for page in pages)]  # fmt: skip
    assert quoted == []
