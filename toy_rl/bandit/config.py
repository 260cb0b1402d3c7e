"""Settings of one bandit run, checked on construction (a bad value is a ValueError naming it)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from ..advantages import ADVANTAGES
from .answers import answer_length
from .rewards import PRESETS

MODES = ("reuse", "lag")
PG_MODES = ("vanilla", "natural")
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class BanditConfig:
    """One bandit experiment (everything but the clipping rule and the seeds).

    Defaults (K = 32, S = 4, G = 8, 300 updates, η = 0.5, vanilla PG, "rare-correct"):
    chosen so that a 4 staleness × 3 rules × 20 seeds sweep takes seconds on a laptop
    CPU and learning is visible but not instant — on-policy the expected reward climbs
    from 0.04 to ~0.95 in about 75 updates. With η = 0.5 one update moves a rare correct
    token's ratio by ~1.15, so the bounds (1.2, 1.28) bite within a couple of reuse
    epochs. They were fixed before comparing the rules and not tuned afterwards.
    Natural PG takes much larger steps on rare tokens: use η ≈ 0.02–0.05 there.

    Args:
        n_tokens: K, tokens per context (≥ 2).
        n_contexts: S, independent contexts ("prompts") per seed (≥ 1).
        group_size: G, answers sampled per context per rollout (≥ 2, GRPO needs a group).
        preset: reward preset, see :mod:`toy_rl.bandit.rewards`.
        steps: optimizer updates (a stale batch counts once per update it is used for).
        lr: η, the step size of gradient ascent on the logits (> 0).
        staleness: 0 is on-policy. "reuse": each batch serves staleness + 1 updates
            (PPO epochs). "lag": every batch comes from the policy `staleness` updates ago.
        mode: "reuse" or "lag" (see :mod:`toy_rl.bandit.simulate`).
        pg: "vanilla" (gradient ascent on the logits) or "natural" (Fisher-preconditioned:
            the logit gradient divided by π, the update the paper's Eq. 6 assumes).
        advantage: "grpo" (group-normalised) or "drgrpo" (group mean only).
        task_seed: which instance of the preset (the run seeds only change sampling).
        dtype: "float64" (default) or "float32".
        answer_len: L, tokens in a right answer (≥ 1). 1 with length_ratio 1 is the one-token
            bandit (every answer one token); see :mod:`toy_rl.bandit.answers` for longer answers.
        length_ratio: λ, how much longer a wrong answer is: reward 1 gives L tokens, reward 0
            gives round(λ·L), rewards in between interpolate (> 0). On-policy the positive share
            of the token-mean loss is then ρ = 1/(1 + λ) in every mixed binary group
            (docs/protocol.md, section 1).

    Named whole configurations (the one-token control, long failures, the trap) are in
    :mod:`toy_rl.bandit.presets`; the defaults here stay the one-token bandit.
    """
    n_tokens: int = 32
    n_contexts: int = 4
    group_size: int = 8
    preset: str = "rare-correct"
    steps: int = 300
    lr: float = 0.5
    staleness: int = 0
    mode: str = "reuse"
    pg: str = "vanilla"
    advantage: str = "grpo"
    task_seed: int = 0
    dtype: str = "float64"
    answer_len: int = 1
    length_ratio: float = 1.0

    def __post_init__(self):
        def need_int(name, low):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {v!r}")
        need_int("n_tokens", 2)
        need_int("n_contexts", 1)
        need_int("group_size", 2)
        need_int("steps", 1)
        need_int("staleness", 0)
        need_int("task_seed", 0)
        need_int("answer_len", 1)
        lr_ok = isinstance(self.lr, (int, float)) and not isinstance(self.lr, bool) and self.lr > 0
        if not (lr_ok and math.isfinite(self.lr)):
            raise ValueError(f"lr (η) must be a finite number > 0; got {self.lr!r}")
        ratio_ok = isinstance(self.length_ratio, (int, float)) and not isinstance(self.length_ratio, bool)
        if not (ratio_ok and math.isfinite(self.length_ratio) and self.length_ratio > 0):
            raise ValueError(f"length_ratio (λ) must be a finite number > 0; got {self.length_ratio!r}")
        for name, allowed in (("preset", PRESETS), ("mode", MODES), ("pg", PG_MODES),
                              ("advantage", ADVANTAGES), ("dtype", DTYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}; got {getattr(self, name)!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def updates_per_batch(self) -> int:
        """E: how many updates one sampled batch serves (staleness + 1 in reuse mode, 1 in lag mode)."""
        return self.staleness + 1 if self.mode == "reuse" else 1

    @property
    def wrong_len(self) -> int:
        """Tokens in a wrong (reward-0) answer: round(λ·L), halves rounded up, at least 1."""
        return answer_length(0.0, self.answer_len, self.length_ratio)

    @property
    def max_len(self) -> int:
        """The longest answer any reward can give: max(L, round(λ·L))."""
        return max(self.answer_len, self.wrong_len)

    def to_dict(self) -> dict:
        return asdict(self)
