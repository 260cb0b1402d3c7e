"""Run small models on one CPU thread (the bandit, the tiny GPT, rollouts of SmolLM2).

Their tensors are tiny (the bandit's: a few thousand numbers), far too small for
intra-op parallelism to pay; worse, on a busy machine every parallel op waits
for a descheduled worker thread (measured: 55 s instead of 0.7 s for one
300-update run on a loaded 2-core box). ``single_thread()`` sets torch to one
thread for the duration of a run and restores the previous setting.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
