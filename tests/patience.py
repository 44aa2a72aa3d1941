"""How long the tests wait for something to happen before they call it a failure.

Every test waits for an event (a server's "listening" line, a reply, a watch's sync report, a
process's exit), never for a fixed time, and gives up only after a ceiling: `ceiling(seconds)`,
where `seconds` is generous on an idle machine and the result grows with the machine's load. On
an idle 2-core machine a server starts in about a second and the ceiling for it is 60 s; at a
load of 20-40 on the same machine, fixed waits of 60 s (a server), 5 s (a watch's sync), 180 s
(the soak) and 300 s (the conformance suite) were not enough, and there the ceilings are 10 to
20 times as long. A wait that ends with its event costs nothing more, so a high ceiling only
lengthens a run that was failing anyway.

One setting decides it: `KBMCP_TEST_PATIENCE`, a factor for every ceiling (e.g. `3` on a slow
CI machine, `1` to fail fast at the base figures). Unset, the factor is the machine's load per
core at the moment the wait starts (the 1-minute load average over the cores this process may
use), never below 1.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

PATIENCE_ENV = "KBMCP_TEST_PATIENCE"


def patience() -> float:
    """The factor every ceiling is multiplied by."""
    given = os.environ.get(PATIENCE_ENV, "").strip()
    if given:
        try:
            factor = float(given)
        except ValueError:
            raise ValueError(f"{PATIENCE_ENV} must be a number, not {given!r}") from None
        if not factor > 0:
            raise ValueError(f"{PATIENCE_ENV} must be above 0, not {given!r}")
        return factor
    return max(1.0, load_per_core())


def load_per_core() -> float:
    """The 1-minute load average divided by the cores this process may run on (0 where the
    system has no load average)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return load / (cores or 1)


def ceiling(seconds: float) -> float:
    """`seconds` (the limit on an idle machine) scaled by `patience()`."""
    return seconds * patience()


def wait_until(condition: Callable[[], bool], seconds: float, what: str = "") -> float:
    """Polls `condition` (every 50 ms) until it holds, for at most `ceiling(seconds)`; the
    seconds it took. For states that no event announces (a row in another process's
    database); where a thread or a process reports, wait on the report instead."""
    limit = ceiling(seconds)
    started = time.monotonic()
    while not condition():
        waited = time.monotonic() - started
        if waited > limit:
            raise AssertionError(f"not within {limit:.0f} s: {what or condition}")
        time.sleep(0.05)
    return time.monotonic() - started
