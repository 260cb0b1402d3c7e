"""Worker of tests/test_integrations_verl.py's two-process gloo test (torch only: no verl import, so
that each spawned process starts in about a second).

Each rank builds its own share of a batch with :func:`shard` and runs the verl plug-in's computation
(:func:`toy_rl.integrations.verl_core.compute_policy_loss`) under ``torch.distributed``; the parent
compares the bounds every rank picked with those of the concatenated batch.
"""
from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist

from toy_rl.clipping import BAPO
from toy_rl.integrations.verl_core import compute_policy_loss

WORLD = 2
T = 12

# name -> (rule, verl loss_agg_mode, dual_clip)
CASES = {
    "bapo-token-mean": (BAPO(), "token-mean", None),
    "bapo-seq-mean": (BAPO(), "seq-mean-token-mean", None),
    "authors": (BAPO.authors_code(), "token-mean", 3.0),
    "empty-rank": (BAPO(), "token-mean", None),
    "nan-rank": (BAPO(), "token-mean", None),
    "all-empty": (BAPO(), "token-mean", None),
}


def shard(case: str, rank: int) -> dict:
    """Rank ``rank``'s micro-batch for ``case``: float64 (batch, T) tensors. The ranks differ on purpose
    (rank 0: r mostly above 1; rank 1: r nearer 1, A mostly < 0), so that neither rank's own bounds
    are the batch's."""
    g = torch.Generator().manual_seed(1000 * rank + sum(map(ord, case)))
    B = 6 + 2 * rank
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    shift = 0.3 if rank == 0 else 0.1
    logp = old + shift + 0.35 * torch.randn(B, T, generator=g, dtype=torch.float64)
    bias = 0.0 if rank == 0 else -0.5
    adv = (bias + torch.randn(B, 1, generator=g, dtype=torch.float64)).expand(B, T).contiguous()
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    if (case == "empty-rank" and rank == 1) or case == "all-empty":
        mask = torch.zeros_like(mask)
    if case == "nan-rank" and rank == 1:
        logp[0, 0] = float("nan")
    return dict(old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask)


def _dp_token_mean(group):
    """verl's token-mean under data parallelism (agg_loss with batch_num_tokens and dp_size), built here
    without verl: local token sum / global token count × dp_size."""
    def agg(loss_mat, loss_mask, mode):
        assert mode == "token-mean"
        n = loss_mask.sum().to(loss_mat.dtype)
        dist.all_reduce(n, group=group)
        return (loss_mat * loss_mask).sum() / n * dist.get_world_size(group)
    return agg


def run(rank: int, store: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    results = {}
    try:
        for case, (rule, mode, dual_clip) in CASES.items():
            s = shard(case, rank)
            s["log_prob"].requires_grad_(True)
            agg = _dp_token_mean(dist.group.WORLD) if mode == "token-mean" and case not in ("nan-rank", "all-empty") \
                else (lambda m, k, mode: (m * k).sum() / k.sum().clamp(min=1))
            try:
                loss, metrics = compute_policy_loss(**s, loss_agg_mode=mode, rule=rule, agg_fn=agg, dual_clip=dual_clip)
                results[case] = dict(loss=float(loss.detach()), **metrics)
            except ValueError as e:
                results[case] = dict(error=str(e))
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
