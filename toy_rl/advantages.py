"""Group-relative advantages (GRPO; Dr. GRPO), shared by every rung.

GRPO (Shao et al. 2024, DeepSeekMath; BAPO §2): for the G answers to one
prompt, A_i = (R_i − mean_j R_j) / (std_j R_j + eps), the std unbiased
(divides by G − 1) as TRL and verl compute it.
Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"):
A_i = R_i − mean_j R_j, no division by the std (which up-weights groups that
are almost all right or all wrong).
A group whose rewards are all equal gets A = 0: it teaches nothing.
"""
from __future__ import annotations

import torch

ADVANTAGES = ("grpo", "drgrpo")
EPS = 1e-6


def group_advantages(rewards: torch.Tensor, kind: str = "grpo", eps: float = EPS) -> torch.Tensor:
    """Advantages for rewards shaped (..., G), the last axis being one prompt's group: "grpo" or "drgrpo"."""
    if kind not in ADVANTAGES:
        raise ValueError(f"advantage must be one of {ADVANTAGES}; got {kind!r}")
    if rewards.shape[-1] < 2:
        raise ValueError(f"a group needs at least 2 answers (G >= 2); got G = {rewards.shape[-1]}")
    centred = rewards - rewards.mean(-1, keepdim=True)
    if kind == "drgrpo":
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)
