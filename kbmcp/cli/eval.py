"""`kbmcp eval`: retrieval quality on a BEIR-format dataset, through the real ingest and search."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbmcp.cli.common import echo_json, open_workspace, printable
from kbmcp.cli.progress import chunk_progress
from kbmcp.search.limits import MAX_LIMIT, MAX_RRF_K, MODE_ALIASES, MODES
from kbmcp.wording import counted

if TYPE_CHECKING:
    from kbmcp.ingest.chunker import ChunkingOptions
    from kbmcp.service.evaluate import EvalReport

DEFAULT_EVAL_MODES = ("lexical", "semantic", "hybrid", "rrf")
COLUMNS = (
    ("mode", "mode", 9),
    ("nDCG@10", "ndcg@10", 8),
    ("R@10", "recall@10", 7),
    ("R@100", "recall@100", 7),
    ("MRR@10", "mrr@10", 7),
    ("p50 ms", "latency_ms_p50", 7),
    ("p95 ms", "latency_ms_p95", 7),
)


def _normalize_modes(modes: tuple[str, ...]) -> tuple[str, ...]:
    chosen = [MODE_ALIASES.get(m.lower(), m.lower()) for m in modes] or list(DEFAULT_EVAL_MODES)
    return tuple(dict.fromkeys(chosen))


def format_table(report: EvalReport) -> str:
    """The per-mode metrics as a fixed-width text table."""
    header = "  ".join(title.ljust(width) for title, _key, width in COLUMNS)
    lines = [header.rstrip(), "  ".join("-" * width for _t, _k, width in COLUMNS)]
    for mode, result in report.modes.items():
        cells = [mode.ljust(COLUMNS[0][2])]
        for _title, key, width in COLUMNS[1:]:
            value = result.metrics[key]
            text = f"{value:.1f}" if key.startswith("latency") else f"{value:.4f}"
            cells.append(text.rjust(width))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _summary(report: EvalReport) -> str:
    how = "reused" if report.ingest.reused else "ingested"
    line = (
        f"{report.dataset}: {counted(report.documents, 'document')} ({how} in knowledge base "
        f"{printable(report.knowledge_base)}), {counted(report.queries, 'query')} with "
        "relevance judgements"
    )
    if report.ingest.report is not None:
        line += f"\n{report.ingest.report.summary_line()}"
    return line


@click.command(name="eval")
@click.argument("dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice([*MODES, *MODE_ALIASES], case_sensitive=False),
    help="Search mode to evaluate (repeatable; default: lexical, semantic, hybrid, rrf).",
)
@click.option(
    "--limit",
    default=MAX_LIMIT,
    show_default=True,
    type=click.IntRange(1, MAX_LIMIT),
    help="Chunk results requested per query (collapsed to documents for the metrics).",
)
@click.option(
    "--kb",
    "kb_name",
    default=None,
    help="Knowledge base to ingest into or reuse (default: beir-<dataset folder name>).",
)
@click.option(
    "--alpha", type=click.FloatRange(0.0, 1.0), default=None, help="Lexical weight in hybrid."
)
@click.option("--rrf-k", type=click.IntRange(1, MAX_RRF_K), default=None, help="RRF constant.")
@click.option(
    "--min-similarity",
    type=click.FloatRange(-1.0, 1.0),
    default=None,
    help="Cosine floor for vector candidates.",
)
@click.option(
    "--candidates",
    type=click.IntRange(min=1),
    default=None,
    help="Candidates per channel before fusion (default: the engine's).",
)
@click.option(
    "--chunk-chars",
    type=click.IntRange(min=1),
    default=None,
    help="Chunk size when the corpus is ingested (default: kbmcp's).",
)
@click.option(
    "--chunk-overlap",
    type=click.IntRange(min=0),
    default=None,
    help="Chunk overlap when the corpus is ingested (default: kbmcp's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics per mode as JSON.")
@click.pass_context
def eval_command(
    ctx: click.Context,
    dataset_dir: Path,
    modes: tuple[str, ...],
    limit: int,
    kb_name: str | None,
    alpha: float | None,
    rrf_k: int | None,
    min_similarity: float | None,
    candidates: int | None,
    chunk_chars: int | None,
    chunk_overlap: int | None,
    as_json: bool,
) -> None:
    """Measure retrieval quality on a BEIR-format dataset (corpus.jsonl, queries.jsonl, qrels).

    The corpus is ingested once into a knowledge base (reused on later runs when it already holds
    every document), then every query runs in each mode. Prints nDCG@10, recall@10, recall@100,
    MRR@10 and query latency per mode. Evaluate in a separate file:

    \b
      kbmcp --db scifact.db eval ./scifact --mode lexical --mode hybrid
    """
    from kbmcp.service.evaluate import EvalOptions, evaluate  # loaded when run, not for --help

    options = EvalOptions(
        modes=_normalize_modes(modes),
        limit=limit,
        alpha=alpha,
        rrf_k=rrf_k,
        min_similarity=min_similarity,
        candidates=candidates,
    )
    chunking = _chunking(chunk_chars, chunk_overlap)
    with (
        open_workspace(ctx, create=True, long_lived=True) as workspace,
        chunk_progress("embedding") as progress,
    ):
        try:
            report = evaluate(
                workspace,
                workspace.local_principal(),
                dataset_dir,
                kb_name=kb_name,
                options=options,
                chunking=chunking,
                progress=progress,
            )
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json(report.to_dict())
        return
    click.echo(_summary(report))
    click.echo(format_table(report))


def _chunking(chunk_chars: int | None, chunk_overlap: int | None) -> ChunkingOptions | None:
    from kbmcp.ingest.chunker import ChunkingOptions  # the parsers: only when eval runs

    if chunk_chars is None and chunk_overlap is None:
        return None
    defaults = ChunkingOptions()
    return ChunkingOptions(
        max_chars=chunk_chars if chunk_chars is not None else defaults.max_chars,
        overlap_chars=chunk_overlap if chunk_overlap is not None else defaults.overlap_chars,
    )
