"""The keyword channel as both backends compute it: FTS5's bm25 over three columns.

SQLite scores with FTS5 itself (kbmcp/store/sqlite/search/lexical/); PostgreSQL reproduces the
same floats from its own postings (kbmcp/store/postgres/keyword.py). What they share is here: the
column weights, the tokenizer FTS5 indexes with, and the stop-word rule.

Stop words: an OR-query over common terms is FTS5's slow case (bm25 runs for every row that
contains any term). Single-token terms found in more than half of the rows are dropped as long
as a rarer term that occurs remains (a phrase is never dropped). This does not change the
ranking: bm25's idf, log((N - n + 0.5) / (n + 0.5)), is negative for n > N/2 and FTS5 clamps it
to 1e-6, so such a term adds at most ~1e-6 to any score. The only other effect, losing chunks
that contain nothing but such terms, is undone by each backend: when the pruned query finds no
more chunks than the candidate depth, the query with every term runs instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# bm25 column weights (title, heading, body). Equal, by measurement (bench/tune_scifact.py,
# docs/retrieval-quality.md): on SciFact, where a document's title is also its heading, lexical
# nDCG@10 is 0.685 with (1, 1, 1), 0.676 with (2, 1.5, 1) and 0.671 with (10, 0, 1); weighting
# titles up only helps documents whose body never repeats the title, and the body of a chunk
# under a heading usually does. (0, 0, 1) scores 0.680: the title and heading columns still help.
TITLE_WEIGHT = 1.0
HEADING_WEIGHT = 1.0
BODY_WEIGHT = 1.0
WEIGHTS = (TITLE_WEIGHT, HEADING_WEIGHT, BODY_WEIGHT)

STOPWORD_DOC_FRACTION = 0.5  # above this, FTS5's bm25 idf is clamped to ~0 (see above)
STOPWORD_MIN_ROWS = 1000  # smaller indexes are cheap to search with every term
# FTS5's tokenizer: as in kbmcp/store/sqlite/sql/002_search_index.sql.
TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])


def prunes(terms: int, rows: int, scope_rows: int | None, depth: int) -> bool:
    """Whether a keyword search tries its terms without the common ones at all: `terms` (the
    query's) two or more, `rows` (of the index, or of the caller's readable set, whose
    frequencies decide) at least STOPWORD_MIN_ROWS, as smaller indexes are cheap to search with
    every term, and a scope (`scope_rows`; None: unscoped) larger than the depth, as a smaller
    one would always fall back to every term. Every path of both backends asks this before
    `common_terms`."""
    return terms >= 2 and rows >= STOPWORD_MIN_ROWS and (scope_rows is None or scope_rows > depth)


def common_terms(
    terms: Sequence[str],
    tokens: Mapping[str, Sequence[str]],
    frequency: Mapping[str, int],
    rows: int,
) -> tuple[list[str], list[str]]:
    """Split terms into (kept, dropped): a single-token term found in more than
    STOPWORD_DOC_FRACTION of `rows` is dropped, unless nothing that may match would remain (a
    single-token term found at all, or a phrase). `frequency`: rows containing each
    single-token term. A phrase is never dropped: one of common tokens ("of the") can be in far
    fewer rows than either token, so its idf, and its share of the ranking, may be far from 0.
    Every path of both backends decides with this one rule."""
    ceiling = STOPWORD_DOC_FRACTION * rows
    common = [t for t in terms if len(tokens[t]) == 1 and frequency[t] > ceiling]
    rest = [t for t in terms if t not in common]
    if not any(len(tokens[t]) > 1 or frequency.get(t, 0) > 0 for t in rest):
        return list(terms), []
    return rest, common
