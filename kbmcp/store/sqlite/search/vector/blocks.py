"""Blocks of a vector pass on two threads, without ever waiting for a busy core.

A pass over many rows (the whole matrix for an unscoped search: 150 MB at 100k chunks) is split
in blocks anyway (vector/matrix.py: BLAS's own threads wait for a core on a busy machine). Here
the calling thread and one helper thread take the blocks from one counter, so the pass takes
about half the time when a second core is free, and when it is not, the calling thread simply
takes every block itself: it never waits for the helper to start, only for the one block the
helper may be computing when the last block is taken (a lock held per block). numpy releases
the GIL inside its matrix products, so the two threads run in parallel. Every block is computed
by the same call whichever thread takes it, so the result is the same as one thread's.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

# A pass of fewer elements (rows x dimensions) than this runs on the calling thread alone:
# handing blocks to the helper costs ~50 us, about what two threads save on a pass of ~1M
# elements (~0.3-0.5 ms). Above it the helper pays: SciFact's whole-matrix pass (5,183 x 384,
# 2M elements in 8 blocks), alternated in one server process, took 1.34-1.41 ms on one thread
# and 0.94-1.00 ms on two, the whole semantic k=10 search 4.3-6.0 -> 3.7-4.1 ms. (The pass is
# memory bound: 8 MB a query, from RAM rather than cache between searches.)
PARALLEL_MIN_ELEMENTS = 1_000_000

_helper: ThreadPoolExecutor | None = None
_helper_lock = threading.Lock()


def run_blocks(count: int, run: Callable[[int], None], block_elements: int) -> None:
    """Run `run(i)` for every i in range(count), each once, on this thread and the helper
    (`block_elements`: about how many elements a block scores)."""
    if count < 2 or count * block_elements < PARALLEL_MIN_ELEMENTS:
        for index in range(count):
            run(index)
        return
    claims = itertools.count()  # next() on it is atomic under the GIL
    helper_busy = threading.Lock()  # held by the helper while it computes a block
    failures: list[BaseException] = []

    def helper() -> None:
        while True:
            with helper_busy:
                index = next(claims)
                if index >= count:
                    return
                try:
                    run(index)
                except BaseException as error:  # re-raised on the calling thread
                    failures.append(error)
                    return

    _executor().submit(helper)
    while (index := next(claims)) < count:
        run(index)
    with helper_busy:  # the block the helper may still be computing
        pass
    if failures:
        raise failures[0]


def _executor() -> ThreadPoolExecutor:
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = ThreadPoolExecutor(1, thread_name_prefix="kbmcp-vector-pass")
        return _helper
