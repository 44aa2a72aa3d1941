"""The vector pass on two threads (kbmcp/store/sqlite/search/vector/blocks.py): every block once,
the same numbers as one thread, failures raised to the caller."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from kbmcp.store.sqlite.search.vector import blocks
from kbmcp.store.sqlite.search.vector.blocks import PARALLEL_MIN_ELEMENTS, run_blocks
from kbmcp.store.sqlite.search.vector.matrix import (
    FULL_PASS_BLOCK_ELEMENTS,
    GATHER_BLOCK,
    all_similarities,
    similarities,
)

# Blocks of a tenth of the helper's threshold: 9 run on the calling thread alone, 10 on both.
BLOCK_ELEMENTS = PARALLEL_MIN_ELEMENTS // 10


@pytest.mark.parametrize("count", [0, 1, 9, 10, 200])
def test_every_block_runs_once_and_has_ended_when_the_call_returns(count: int) -> None:
    """Eight callers at once (a server's concurrent requests) share the one helper thread; a
    call returns only once the helper's block has ended too (its result is in the output)."""
    outcomes: list[Counter[int] | None] = [None] * 8

    def caller(slot: int) -> None:
        ended: Counter[int] = Counter()

        def run(index: int) -> None:
            threading.Event().wait(0.0002)  # a block takes a while
            ended[index] += 1

        run_blocks(count, run, BLOCK_ELEMENTS)
        outcomes[slot] = Counter(ended)  # what had ended when the call returned

    threads = [threading.Thread(target=caller, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [Counter(range(count))] * 8


def test_a_failing_block_is_raised_on_the_calling_thread() -> None:
    helper_ident: list[int] = []

    def run(index: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            helper_ident.append(index)
            raise ValueError("block failed")
        # The caller is slow, so that the helper takes some of the blocks.
        threading.Event().wait(0.002)

    with pytest.raises(ValueError, match="block failed"):
        for _ in range(50):  # until the helper got a block (it usually does at once)
            run_blocks(100, run, BLOCK_ELEMENTS)
    assert helper_ident


@pytest.mark.parametrize("rows", [5_183, 9_000])
def test_two_threads_give_one_threads_numbers_bit_for_bit(
    rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(rows)
    matrix = rng.random((rows, 384), dtype=np.float32) - 0.5
    query = rng.random(384, dtype=np.float32) - 0.5
    picked = np.sort(rng.choice(rows, size=rows // 3, replace=False))
    both = all_similarities(matrix, query), similarities(matrix, picked, query)
    monkeypatch.setattr(blocks, "PARALLEL_MIN_ELEMENTS", 10**12)  # the calling thread alone
    one = all_similarities(matrix, query), similarities(matrix, picked, query)
    assert np.array_equal(both[0], one[0]) and np.array_equal(both[1], one[1])
    # Both whole-matrix passes are long enough for the helper; of the gathered thirds only 9k's.
    step = FULL_PASS_BLOCK_ELEMENTS // 384
    assert -(-rows // step) * step * 384 >= PARALLEL_MIN_ELEMENTS
    gathered = -(-(rows // 3) // GATHER_BLOCK) * GATHER_BLOCK * 384
    assert (gathered >= PARALLEL_MIN_ELEMENTS) == (rows == 9_000)
