"""A readable set's keyword postings and counts from its own rows' tokens, not the whole index.

Why: a caller who reads part of the file is scored with its readable set's statistics
(stats.py), but the server found a phrase's rows inside the set from the phrase's postings over
the whole index (postings.py): filling them scores every row of every tenant that contains the
phrase, and they are kept for everybody. So the first search of a word cost what other tenants'
rows containing it cost (a tenant reading one chunk: 12-33 ms for a word in another tenant's
4,800 chunks against 0.7-1.6 ms for an absent one), and a word another tenant had searched
lately was fast (bench/timing_oracle.py: a threshold told them apart 88-95% of the time).

Here a set of at most OWN_TOKENS_MAX_ROWS rows finds each phrase in its own rows: their tokens
(tokenised once with the index's tokenizer, kept in the accelerator's token cache, checked
against FTS5's docsize records as the scope scan does: scan.py) give each row's f exactly, and
so the phrase's n inside the set and its bm25 terms for the set's statistics, the same floats
the postings gave. The work is that of the set's own rows, whatever the rest of the file holds
or whoever searched what; nothing is shared with another set. A larger set keeps the postings
path (docs/security.md, "Known limits"): tokenising it would cost more than the postings, and
its own rows then make up most of a phrase's cost anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apsw
import numpy as np

from kbmcp.search.lexical.channel import WEIGHTS
from kbmcp.store.sqlite.search.lexical.scan import Phrase, phrase_frequencies
from kbmcp.store.sqlite.search.lexical.tokens import TokenCache
from kbmcp.store.tokenizer import index_tokenizer

if TYPE_CHECKING:
    from kbmcp.store.sqlite.search.lexical.stats import ReadableRows

# ~1.8M tokens of ~90-token chunks, under half the token cache (tokens.py MAX_TOKENS); tokenising
# them cold takes ~0.6 s once, after which a new phrase costs a pass over their token ids.
OWN_TOKENS_MAX_ROWS = 20_000


@dataclass
class OwnTokens:
    """How a readable set finds phrases in its own rows (see the module docstring)."""

    tokens: TokenCache  # the accelerator's: the rows' tokens are kept there

    def frequencies(
        self, conn: apsw.Connection, readable: ReadableRows, phrases: Sequence[Phrase]
    ) -> np.ndarray | None:
        """Each phrase's f in each row of the set (phrases x rows, float64); None when some
        row's text differs from what FTS5 indexed (the caller then uses the postings)."""
        assert readable.ids is not None
        found = phrase_frequencies(
            conn, phrases, readable.ids, WEIGHTS, index_tokenizer(), self.tokens
        )
        return None if found is None else found[0]


def own_tokens_for(readable: ReadableRows, tokens: TokenCache) -> OwnTokens | None:
    """Own-token scoring for a readable set small enough for it (None otherwise)."""
    if readable.ids is None or len(readable.ids) > OWN_TOKENS_MAX_ROWS:
        return None
    return OwnTokens(tokens)
