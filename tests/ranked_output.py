"""Ranked output (search responses as JSON) in a form that is the same on every run, every
machine and both store backends: what query snapshots store and what comparisons of two runs
compare.

- `elapsed_ms` is wall-clock time, so it is dropped.
- Scores are rounded to 6 decimals: similarities are float32 (~7 significant digits) and BLAS
  kernels differ in the last bits between CPUs, and fused scores inherit that.
- `stats.lexical_strategy` / `vector_strategy` name how a channel found its candidates, which
  differs by backend and by process (SQLite: `fts5`, `postings`, `scan`, `sql_exact`,
  `vec0_scan`, `vec0_knn`, `matrix_exact`; PostgreSQL: `postings`, `postings_bounded`, `pg_exact`,
  `pg_hnsw`; docs/search.md). They are kept as what they promise, the same on every path:
  "exact" (the channel's best candidates in the scope, found exactly) or "approximate" (an
  approximate index chose the candidates; their scores are still exact). A name not listed
  here fails, so a new strategy is classified when it is added.

Everything else is kept as it is.
"""

from __future__ import annotations

from typing import Any

SCORE_DECIMALS = 6
STRATEGY_KEYS = ("lexical_strategy", "vector_strategy")
STRATEGY_RECALL = {
    "fts5": "exact",
    "scan": "exact",
    "postings": "exact",
    "sql_exact": "exact",
    "vec0_knn": "exact",
    "vec0_scan": "exact",
    "matrix_exact": "exact",
    "pg_exact": "exact",
    "postings_bounded": "approximate",
    "pg_hnsw": "approximate",
}


def stable(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, SCORE_DECIMALS)
    if isinstance(value, dict):
        return {
            key: _recall(item) if key in STRATEGY_KEYS else stable(item)
            for key, item in value.items()
            if key != "elapsed_ms"
        }
    if isinstance(value, list):
        return [stable(item) for item in value]
    return value


def _recall(strategy: str | None) -> str | None:
    if strategy is None:
        return None
    if strategy not in STRATEGY_RECALL:
        raise AssertionError(
            f"unclassified search strategy {strategy!r}: add it to STRATEGY_RECALL"
        )
    return STRATEGY_RECALL[strategy]
