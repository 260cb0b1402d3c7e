"""Run small models on few CPU threads (the bandit, the tiny GPT, rollouts of SmolLM2): the one place that sets
torch's thread count.

Their tensors are tiny (the bandit's: a few thousand numbers), far too small for
intra-op parallelism to pay; worse, on a busy machine every parallel op waits
for a descheduled worker thread (measured: 55 s instead of 0.7 s for one
300-update run on a loaded 2-core box; a SmolLM2 rollout of 64 answers took
2.1 s on one thread, 7.7-36 s on two). ``cpu_threads(n)`` sets torch to ``n``
threads for the duration of a block and restores the previous setting;
``single_thread()`` is ``cpu_threads(1)``; ``set_threads(n)`` sets it from
now on (a notebook's first cell).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


def set_threads(n: int | None) -> int:
    """torch on ``n`` CPU threads from now on (None: leave it); returns the number it had before."""
    before = torch.get_num_threads()
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"threads must be an integer >= 1 or None; got {n!r}")
        torch.set_num_threads(n)
    return before


@contextmanager
def cpu_threads(n: int | None):
    """torch on ``n`` CPU threads inside the block, the previous number restored after; None leaves it alone."""
    before = set_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(before)


def single_thread():
    """torch on one CPU thread inside the block (``cpu_threads(1)``)."""
    return cpu_threads(1)
