"""`kbmcp search`: the service's search on the command line (no logic of its own)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from kbmcp.cli.common import UTF8_TEXT, echo_json, open_workspace, pairs_option, printable
from kbmcp.cli.flags import flag
from kbmcp.search.limits import (
    DEFAULT_ALPHA,
    DEFAULT_LIMIT,
    DEFAULT_MODE,
    MAX_HALF_LIFE,
    MAX_LIMIT,
    MAX_RRF_K,
    MODE_ALIASES,
    MODES,
)
from kbmcp.wording import counted

if TYPE_CHECKING:
    from kbmcp.search.models import SearchResponse


@click.command()
@click.argument("query", type=UTF8_TEXT)
@click.option(
    "--mode",
    type=click.Choice([*MODES, *MODE_ALIASES], case_sensitive=False),
    default=None,
    help=f"hybrid: keyword+semantic scores; lexical (keyword): exact words; semantic: meaning; "
    f"rrf: reciprocal rank fusion. Default: {DEFAULT_MODE}, or rrf with --rrf-k.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help=f"Lexical weight in hybrid mode (0: semantic only, 1: lexical only; default "
    f"{DEFAULT_ALPHA}).",
)
@click.option(
    "--rrf-k",
    type=click.IntRange(1, MAX_RRF_K),
    default=None,
    help="RRF constant (default: $KBMCP_RRF_K or 60).",
)
@click.option(
    "--min-similarity",
    type=click.FloatRange(-1.0, 1.0),
    default=None,
    help="Cosine floor for vector candidates (keyword matches are kept).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help=f"Results to return (at most {MAX_LIMIT}; more is clamped, as in the MCP tool).",
)
@click.option(
    "--kb", "kbs", multiple=True, type=UTF8_TEXT, metavar="ID_OR_NAME", help="Knowledge base."
)
@click.option("--doc", "docs", multiple=True, type=UTF8_TEXT, metavar="ID", help="Document id.")
@click.option(
    "--path", "paths", multiple=True, type=UTF8_TEXT, metavar="PREFIX", help="Document path prefix."
)
@click.option(
    "--tag", "tags", multiple=True, type=UTF8_TEXT, metavar="KEY=VALUE", help="Tag that must match."
)
@click.option(
    "--meta", "meta", multiple=True, type=UTF8_TEXT, metavar="KEY=VALUE", help="Metadata equality."
)
@click.option(
    "--store",
    "stores",
    multiple=True,
    type=UTF8_TEXT,
    metavar="ID_OR_NAME",
    help="Memory store (alone, it searches memories only).",
)
@click.option(
    "--only",
    type=click.Choice(["documents", "memories"]),
    default=None,
    help="Search one kind only (default: documents and memories).",
)
@click.option(
    "--half-life",
    type=click.FloatRange(min=0.0, max=MAX_HALF_LIFE),
    default=None,
    metavar="DAYS",
    help="Memories' recency half-life in days, 0 for none (default: "
    "$KBMCP_RECENCY_HALF_LIFE_DAYS or 0).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the service's response as JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    mode: str | None,
    alpha: float | None,
    rrf_k: int | None,
    min_similarity: float | None,
    limit: int,
    kbs: tuple[str, ...],
    docs: tuple[str, ...],
    paths: tuple[str, ...],
    tags: tuple[str, ...],
    meta: tuple[str, ...],
    stores: tuple[str, ...],
    only: str | None,
    half_life: float | None,
    as_json: bool,
) -> None:
    """Search the knowledge bases; every filter applies before ranking and the limit.

    \b
    Examples:
      kbmcp search "rotate api keys"
      kbmcp search "backup" --kb handbook --path ops/ --tag team=infra --mode lexical
      kbmcp search "deploy freeze" --only memories --half-life 30
    """
    from kbmcp.search.models import SearchFilters, SearchRequest
    from kbmcp.service.listing import resolve_knowledge_bases
    from kbmcp.service.memories import resolve_memory_stores
    from kbmcp.service.search import search as run_search  # numpy and the engine: when run

    with open_workspace(ctx) as workspace:
        principal = workspace.local_principal()
        filters = SearchFilters(
            knowledge_base_ids=(
                resolve_knowledge_bases(workspace, principal, kbs) if kbs else None
            ),
            document_ids=list(docs) or None,
            document_paths=list(paths) or None,
            tags=dict(pairs_option(tags, "--tag")) or None,
            metadata=dict(pairs_option(meta, "--meta")) or None,
            memory_store_ids=(
                resolve_memory_stores(workspace, principal, stores) if stores else None
            ),
            include_documents=False if only == "memories" else None,
            include_memories=False if only == "documents" else None,
        )
        request = SearchRequest(
            query=query,
            mode=mode.lower() if mode else None,
            alpha=alpha,
            rrf_k=rrf_k,
            min_similarity=min_similarity,
            limit=limit,
            filters=filters,
            recency_half_life_days=half_life,
        )
        response = run_search(workspace, principal, request)
    if as_json:  # as the MCP tool's result: led by its request_mode
        echo_json({"request_mode": "query", **dataclasses.asdict(response)})
    else:
        _print_readable(response)


def _print_readable(response: SearchResponse) -> None:
    stats = response.stats
    if not response.results:
        unmatched = (  # in the flags the user typed: --path, not document_paths
            f" (filters that matched nothing: {', '.join(map(flag, stats.filters_unmatched))})"
            if stats.filters_unmatched
            else ""
        )
        click.echo(f"no results{unmatched}")
        return
    for rank, result in enumerate(response.results, start=1):
        lines = f"{result.citation.line_start}-{result.citation.line_end}"
        title = "memory" if result.kind == "memory" else printable(result.title)
        click.echo(f"{rank:>2}. {result.score:.4f}  {title}  {printable(result.path)}:{lines}")
        heading = " > ".join(result.heading_path)
        if heading:
            click.echo(f"    § {printable(heading)}")
        for line in result.excerpt.splitlines():
            if line.strip():
                click.echo(f"    {printable(line)}")
        click.echo(f"    [{result.chunk_id} {result.document_id}]")
    more = "; more results exist (raise --limit)" if stats.has_more else ""
    click.echo(
        f"-- {counted(stats.results, 'result')}, {response.mode}, {stats.elapsed_ms:.0f} ms{more}",
        err=True,
    )
