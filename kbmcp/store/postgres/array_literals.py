"""PostgreSQL's text form of the arrays a search sends as parameters (cast in the SQL)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bigint_array_literal(ids: Sequence[int] | np.ndarray) -> str:
    """PostgreSQL's text form of a bigint array, `{1,2,3}` (cast by `::bigint[]` in the SQL).
    A scope of 10k chunk ids as a Python list costs psycopg ~3 ms of per-element dumping under
    no load (~70 ms on a loaded machine); one string costs a join."""
    return "{" + ",".join(map(str, np.asarray(ids, dtype=np.int64).tolist())) + "}"


def float8_array_literal(values: Sequence[float]) -> str:
    """PostgreSQL's text form of a float8 array (cast by `::float8[]` in the SQL): each value
    as its shortest repr, which PostgreSQL reads back to the same double (as psycopg writes a
    float). The ranking's 200 candidates' ids and scores as lists cost psycopg ~1 ms of
    per-element dumping per search on a loaded machine; strings cost a join."""
    return "{" + ",".join(map(repr, map(float, values))) + "}"
