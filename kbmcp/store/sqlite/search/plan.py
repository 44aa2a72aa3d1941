"""The search plan: which strategy produces each channel's candidates, chosen once per request.

Every strategy yields the same candidates for the ranking statement (search/ranking.py); they
differ in cost. One threshold per channel decides, from the size of the scope and whether the
process holds accelerators (search/accelerator.py):

| channel  | accelerated (long-lived process)           | plain (one-shot process)              |
|----------|--------------------------------------------|---------------------------------------|
| lexical  | "scan" up to LEXICAL_SCAN_MAX_ROWS chunks  | "fts5": FTS5 MATCH over the scope     |
|          | unless every term is in the postings;      |                                       |
|          | "postings" otherwise                       |                                       |
| semantic | "matrix_exact": every allowed row scored   | "sql_exact" up to VECTOR_EXACT_MAX_   |
|          | in memory                                  | ROWS chunks; "vec0_scan" above        |

Measured costs behind the thresholds (100k chunks, docs/search.md): the scope scan ~30 us per
allowed chunk cold and far less once its tokens are kept, against ~1 us per posting to fill the
postings of an uncached term (a word in half the chunks: ~50 ms); exact vector scoring ~3 us a
row in SQL (so above 20,000 rows a pass over every vector of the vec0 index, ~70 ms at 100k, is
cheaper) and ~0.1 us in memory (every row of 100k in ~7-10 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

LEXICAL_SCAN_MAX_ROWS = 2000
VECTOR_EXACT_MAX_ROWS = 20_000


@dataclass(frozen=True)
class Plan:
    lexical: str | None  # None: the channel is not run
    vector: str | None


def choose_plan(
    *,
    scope_rows: int | None,
    accelerated: bool,
    lexical: bool,
    semantic: bool,
    terms_in_postings: bool,
) -> Plan:
    """`scope_rows` None: the scope is the caller's whole readable set (every indexed chunk
    it may read, whatever else the file holds: the plan depends on nothing the caller cannot
    read). `terms_in_postings`: requests over the same readable set used postings of every
    term (not merely another tenant's requests)."""
    return Plan(
        lexical=_lexical(scope_rows, accelerated, terms_in_postings) if lexical else None,
        vector=_vector(scope_rows, accelerated) if semantic else None,
    )


def _lexical(scope_rows: int | None, accelerated: bool, terms_in_postings: bool) -> str:
    if not accelerated:
        return "fts5"
    small = scope_rows is not None and scope_rows <= LEXICAL_SCAN_MAX_ROWS
    return "scan" if small and not terms_in_postings else "postings"


def _vector(scope_rows: int | None, accelerated: bool) -> str:
    if accelerated:
        return "matrix_exact"
    small = scope_rows is not None and scope_rows <= VECTOR_EXACT_MAX_ROWS
    return "sql_exact" if small else "vec0_scan"
