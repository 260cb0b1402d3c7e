"""Counter-based random numbers: one independent stream per seed, all seeds in one tensor operation.

A uniform number is a hash of (seed, stream, step, index) — the splitmix64
generator (Steele et al. 2014; the seeding routine of numpy and Java) evaluated
at a chosen position instead of by advancing a state. Why not ``torch.Generator``:
one generator serves one seed, so 20 seeds would need a Python loop over 20
generators at every step. With a hash, ``uniforms([0, 1, ..., 19], ...)`` is
one tensor operation, and the numbers seed 3 gets are the same whether it runs
alone or next to 19 others: a run is repeatable seed by seed.

int64 tensors wrap around on overflow, which is exactly the unsigned 64-bit
arithmetic splitmix64 needs; right shifts are made logical with a mask.
"""
from __future__ import annotations

import math

import torch


def _signed(c: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


GAMMA = _signed(0x9E3779B97F4A7C15)   # golden-ratio increment of splitmix64
MUL1 = _signed(0xBF58476D1CE4E5B9)
MUL2 = _signed(0x94D049BB133111EB)

# streams: which random quantity the numbers are for (same seed and step, independent numbers):
# the decision tokens, Bernoulli rewards, and the continuation tokens of multi-token answers
ACTIONS, REWARDS, CONTINUATION = 0, 1, 2


def _shift_right(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical (unsigned) right shift of int64 values."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """The splitmix64 output function: a bijection of 64-bit integers that scrambles every bit."""
    x = (x ^ _shift_right(x, 30)) * MUL1
    x = (x ^ _shift_right(x, 27)) * MUL2
    return x ^ _shift_right(x, 31)


def uniforms(seeds, stream: int, step: int, shape: tuple, dtype=torch.float64) -> torch.Tensor:
    """Uniform numbers in [0, 1), shaped (len(seeds), *shape): row i depends only on seeds[i], stream, step.

    ``step`` must be in [0, 2**31) and ``shape`` hold fewer than 2**32 numbers.
    """
    seeds = torch.as_tensor(seeds, dtype=torch.int64).reshape(-1)
    n = math.prod(shape)
    key = mix64(mix64(seeds * GAMMA + stream) + _signed((stream * GAMMA) % (1 << 64)))   # (seeds,); wraps like int64
    counter = step * (1 << 32) + torch.arange(n, dtype=torch.int64)            # position in the stream
    bits = mix64(key[:, None] + counter[None, :] * GAMMA)
    u = _shift_right(bits, 11).to(torch.float64) * 2.0 ** -53                 # top 53 bits -> [0, 1)
    return u.to(dtype).reshape((len(seeds),) + tuple(shape))
