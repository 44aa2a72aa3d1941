"""A search request's modes, defaults and bounds: plain values, so that the command line can
show them in its options (`kbmcp search --help`) without loading the models or the engine.
kbmcp/search/models.py re-exports every one."""

from __future__ import annotations

MODES = ("hybrid", "lexical", "semantic", "rrf")
MODE_ALIASES = {"keyword": "lexical"}
DEFAULT_MODE = "hybrid"
DEFAULT_ALPHA = 0.5
# The mode each fusion parameter belongs to: given without a mode, it selects that mode; given
# with another mode, it would do nothing, so it is an error (nothing is silently ignored).
FUSION_PARAMETERS = {"alpha": "hybrid", "rrf_k": "rrf"}
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_DOCUMENT_IDS = 100
MAX_KNOWLEDGE_BASE_IDS = 100
MAX_MEMORY_STORE_IDS = 100
MAX_PATH_PREFIXES = 100
MAX_FILTER_PAIRS = 50  # keys of a tags or metadata filter
MAX_QUERY_CHARS = 10_000
# A read window of a document: its default and largest size in characters (targeted reads, and
# the text include_content inlines in query results).
DEFAULT_LIMIT_CHARS = 4000
MAX_LIMIT_CHARS = 10_000
# A half-life longer than this is no decay worth computing (and keeps 2^(-age/h) finite).
MAX_HALF_LIFE = 1_000_000.0
# include_content inlines the text of this many distinct documents (or memories) of a query.
MAX_INLINED_DOCUMENTS = 5
# rrf_k's upper bound. Past a few hundred every rank scores nearly alike (1/(k+1) vs 1/(k+2)), so
# a larger k only flattens the ranking further; values near 2^63 overflowed SQLite's integers.
MAX_RRF_K = 10_000
