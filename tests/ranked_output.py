"""Ranked output (search responses as JSON) in a form that is the same on every run and every
machine: what query snapshots store and what comparisons of two runs compare.

`elapsed_ms` is wall-clock time, so it is dropped. Scores are rounded to 6 decimals: similarities
are float32 (~7 significant digits) and BLAS kernels differ in the last bits between CPUs, and
fused scores inherit that. Everything else is kept as it is.
"""

from __future__ import annotations

from typing import Any

SCORE_DECIMALS = 6


def stable(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, SCORE_DECIMALS)
    if isinstance(value, dict):
        return {key: stable(item) for key, item in value.items() if key != "elapsed_ms"}
    if isinstance(value, list):
        return [stable(item) for item in value]
    return value
