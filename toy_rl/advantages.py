"""Group-relative advantages (GRPO; Dr. GRPO), shared by every rung.

GRPO (Shao et al. 2024, Eq. 3 of BAPO's §2): for the G answers to one prompt,
A_i = (R_i − mean(R)) / (std(R) + eps). Dr. GRPO (Liu et al. 2025) drops the
division by the std: A_i = R_i − mean(R). A group whose answers all score the
same gets A = 0 (it carries no signal).
"""
from __future__ import annotations

import torch

EPS = 1e-6


def group_advantages(rewards: torch.Tensor, scale: bool = True, eps: float = EPS) -> torch.Tensor:
    """Advantages for rewards shaped (..., G): the last axis is the group of one prompt.

    ``scale=True``: GRPO, divided by the group's std (unbiased, as in the GRPO
    reference code). ``scale=False``: Dr. GRPO, mean-centred only.
    """
    if rewards.shape[-1] < 2:
        raise ValueError(f"a group needs at least 2 answers (G >= 2); got G = {rewards.shape[-1]}")
    centred = rewards - rewards.mean(-1, keepdim=True)
    if not scale:
        return centred
    return centred / (rewards.std(-1, keepdim=True) + eps)
